/**
 * Collects what is sent during one event-loop turn and hands it over at once, at the end of the turn
 * (setImmediate: after the I/O callbacks and microtasks that produced it, microseconds later), in the
 * order it was sent, at most `maxBatch` items at a time (a frame-size cap; none by default).
 */
export class TurnBatcher<T> {
    private pending: T[] = [];

    constructor(private readonly flush: (items: T[]) => void, private readonly maxBatch = Infinity) {}

    push(item: T): void {
        this.pending.push(item);
        if (this.pending.length === 1)
            setImmediate(() => this.drain());
    }

    private drain(): void {
        const items = this.pending;
        this.pending = [];
        for (let i = 0; i < items.length; i += this.maxBatch)
            this.flush(items.slice(i, i + this.maxBatch));
    }
}
