/**
 * Recorded values with the time they were recorded, for exact percentiles over a recent time window
 * (the caller picks it: `since(now - windowMs)`). At most `capacity` values are kept, the oldest
 * dropped first.
 */
export class TimedValueWindow {
    private readonly times: Float64Array;
    private readonly values: Float64Array;
    private start = 0;
    private length = 0;
    /** Bumps on every push; lets callers cache what they computed from the contents. */
    version = 0;

    constructor(readonly capacity: number) {
        if (!Number.isInteger(capacity) || capacity < 1)
            throw new RangeError(`window capacity must be a positive integer, got ${capacity}`);
        this.times = new Float64Array(capacity);
        this.values = new Float64Array(capacity);
    }

    push(t: number, value: number): void {
        const end = (this.start + this.length) % this.capacity;
        this.times[end] = t;
        this.values[end] = value;
        if (this.length < this.capacity)
            this.length++;
        else
            this.start = (this.start + 1) % this.capacity;
        this.version++;
    }

    /** Values recorded strictly after `t`, oldest first. */
    since(t: number): Float64Array {
        const first = this.firstIndexAfter(t);
        const out = new Float64Array(this.length - first);
        for (let i = first; i < this.length; i++)
            out[i - first] = this.values[(this.start + i) % this.capacity]!;
        return out;
    }

    /** Logical index (0 = oldest held) of the first value recorded after `t`; values are time-ordered. */
    firstIndexAfter(t: number): number {
        let lo = 0;
        let hi = this.length;
        while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (this.times[(this.start + mid) % this.capacity]! > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    }

    clear(): void {
        this.start = 0;
        this.length = 0;
        this.version++;
    }
}
