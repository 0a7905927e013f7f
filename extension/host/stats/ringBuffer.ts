/** A fixed-capacity FIFO: pushing past the capacity drops the oldest item. */
export class RingBuffer<T> {
    private readonly items: Array<T | undefined>;
    private start = 0;
    private length = 0;
    /** Items ever pushed (also counts the ones since dropped); a cursor for "what is new". */
    private pushed = 0;

    constructor(readonly capacity: number) {
        if (!Number.isInteger(capacity) || capacity < 1)
            throw new RangeError(`ring buffer capacity must be a positive integer, got ${capacity}`);
        this.items = new Array<T | undefined>(capacity);
    }

    get size(): number {
        return this.length;
    }

    get totalPushed(): number {
        return this.pushed;
    }

    push(item: T): void {
        const end = (this.start + this.length) % this.capacity;
        this.items[end] = item;
        if (this.length < this.capacity)
            this.length++;
        else
            this.start = (this.start + 1) % this.capacity;
        this.pushed++;
    }

    /** Oldest first. */
    toArray(): T[] {
        return this.lastN(this.length);
    }

    /** The most recent `n` items (fewer if there are fewer), oldest first. */
    lastN(n: number): T[] {
        const count = Math.max(0, Math.min(n, this.length));
        const out: T[] = [];
        for (let i = this.length - count; i < this.length; i++)
            out.push(this.items[(this.start + i) % this.capacity] as T);
        return out;
    }

    /** Items pushed after the cursor `totalPushed` had the value `cursor` (only those still held). */
    since(cursor: number): T[] {
        return this.lastN(this.pushed - cursor);
    }

    clear(): void {
        this.items.fill(undefined);
        this.start = 0;
        this.length = 0;
        this.pushed = 0;
    }
}
