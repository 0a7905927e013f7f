/**
 * Time-ordered points kept for at most `windowMs` (measured from the newest point) and at most
 * `maxPoints`: whatever is pushed, memory stays flat. Pushing is amortised O(1): dropped points are
 * skipped by a head index and the array is compacted once the dead part is the larger half.
 */
export type Timed = {t: number};

export class BoundedSeries<T extends Timed> {
    private items: T[] = [];
    private head = 0;

    constructor(readonly windowMs: number, readonly maxPoints: number) {
        if (!(windowMs > 0) || !Number.isInteger(maxPoints) || maxPoints < 1)
            throw new RangeError(`bad series bounds: windowMs ${windowMs}, maxPoints ${maxPoints}`);
    }

    get size(): number {
        return this.items.length - this.head;
    }

    /** Newest point's time, or undefined when empty. */
    get lastT(): number | undefined {
        return this.size === 0 ? undefined : this.items[this.items.length - 1]!.t;
    }

    /** Appends points newer than the newest one held (older or equal ones are duplicates: skipped). */
    push(points: readonly T[]): void {
        for (const point of points) {
            const last = this.lastT;
            if (last !== undefined && point.t <= last)
                continue;
            this.items.push(point);
        }
        this.trim();
    }

    clear(): void {
        this.items = [];
        this.head = 0;
    }

    /** The points with `t >= from`, oldest first (a new array). */
    since(from: number): T[] {
        let lo = this.head;
        let hi = this.items.length;
        while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (this.items[mid]!.t < from)
                lo = mid + 1;
            else
                hi = mid;
        }
        return this.items.slice(lo);
    }

    toArray(): T[] {
        return this.items.slice(this.head);
    }

    /** Length of the backing array (held + not yet compacted), for memory checks. */
    get capacityUsed(): number {
        return this.items.length;
    }

    private trim(): void {
        const last = this.lastT;
        if (last === undefined)
            return;
        const cutoff = last - this.windowMs;
        while (this.head < this.items.length && (this.items[this.head]!.t < cutoff || this.items.length - this.head > this.maxPoints))
            this.head++;
        if (this.head > 64 && this.head * 2 > this.items.length) {
            this.items = this.items.slice(this.head);
            this.head = 0;
        }
    }
}
