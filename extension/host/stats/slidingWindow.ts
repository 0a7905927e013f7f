/**
 * A sum over a sliding time window (e.g. tokens in the last 5 s), exact: every addition is kept with
 * its time until it leaves the window. `maxEntries` bounds memory under extreme rates (the oldest
 * entries are dropped first, which can only under-count).
 */
export class SlidingWindowSum {
    private times: number[] = [];
    private amounts: number[] = [];
    private head = 0;
    private total = 0;

    constructor(readonly windowMs: number, private readonly maxEntries = 100_000) {
        if (!(windowMs > 0))
            throw new RangeError(`sliding window must be > 0 ms, got ${windowMs}`);
    }

    add(t: number, amount: number): void {
        if (amount === 0)
            return;
        this.times.push(t);
        this.amounts.push(amount);
        this.total += amount;
        if (this.times.length - this.head > this.maxEntries)
            this.dropOldest();
    }

    /** Sum of the amounts added after `now - windowMs`. */
    sum(now: number): number {
        const cutoff = now - this.windowMs;
        while (this.head < this.times.length && this.times[this.head]! <= cutoff)
            this.dropOldest();
        if (this.head > 1024 && this.head * 2 > this.times.length) {
            this.times = this.times.slice(this.head);
            this.amounts = this.amounts.slice(this.head);
            this.head = 0;
        }
        if (this.head === this.times.length)
            this.total = 0; // no drift from floating-point additions once the window is empty
        return this.total;
    }

    /**
     * Average rate per second over the window, ending at `now`. While less than a window has passed
     * since `since` (start or reset), divides by the time actually covered instead.
     */
    ratePerS(now: number, since: number): number {
        const spanMs = Math.min(this.windowMs, now - since);
        return spanMs > 0 ? this.sum(now) / (spanMs / 1000) : 0;
    }

    clear(): void {
        this.times = [];
        this.amounts = [];
        this.head = 0;
        this.total = 0;
    }

    private dropOldest(): void {
        this.total -= this.amounts[this.head]!;
        this.head++;
    }
}
