/** An entry that can wait: higher `priority` first; preempted before fresh; then first come, first served. */
export type Queueable = {priority: number, preempted: boolean, arrivalSeq: number};

/**
 * The engine's waiting queue. Small (it holds requests, not tokens), so a sorted array with binary
 * insertion is simpler and faster than a heap for the sizes seen here.
 */
export class WaitingQueue<T extends Queueable> {
    private readonly items: T[] = [];

    get length(): number {
        return this.items.length;
    }

    push(item: T): void {
        let lo = 0;
        let hi = this.items.length;
        while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (comesBefore(this.items[mid]!, item))
                lo = mid + 1;
            else
                hi = mid;
        }
        this.items.splice(lo, 0, item);
    }

    peek(): T | undefined {
        return this.items[0];
    }

    shift(): T | undefined {
        return this.items.shift();
    }

    remove(item: T): boolean {
        const index = this.items.indexOf(item);
        if (index < 0)
            return false;
        this.items.splice(index, 1);
        return true;
    }

    /** In the order they are served. */
    [Symbol.iterator](): Iterator<T> {
        return this.items[Symbol.iterator]();
    }

    drain(): T[] {
        return this.items.splice(0, this.items.length);
    }
}

function comesBefore(a: Queueable, b: Queueable): boolean {
    if (a.priority !== b.priority)
        return a.priority > b.priority;
    if (a.preempted !== b.preempted)
        return a.preempted;
    return a.arrivalSeq < b.arrivalSeq;
}
