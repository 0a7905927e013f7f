/**
 * The prefix-cache hit rate over the most recent requests, as vLLM's `CachingMetrics`
 * (vllm/v1/metrics/stats.py): each step's lookups — requests, tokens queried, tokens hit — go into a
 * queue; once the queue holds more than `maxRecentRequests` requests the oldest steps leave it (the
 * newest step always stays, even when it alone holds more). Steps without lookups are not queued, so
 * an idle engine keeps its last hit rate instead of sliding to 0.
 */
export class CachingMetrics {
    private readonly queue: Array<{requests: number, queries: number, hits: number}> = [];
    private head = 0;
    private requests = 0;
    private queries = 0;
    private hits = 0;

    /** `maxRecentRequests`: vLLM's default, 1000. */
    constructor(readonly maxRecentRequests = 1000) {
        if (!Number.isInteger(maxRecentRequests) || maxRecentRequests < 1)
            throw new RangeError(`maxRecentRequests must be a positive integer, got ${maxRecentRequests}`);
    }

    /** One step's lookups: `requests` looked up, `queries` tokens queried, `hits` of them found. */
    observe(requests: number, queries: number, hits: number): void {
        if (requests === 0)
            return;
        this.queue.push({requests, queries, hits});
        this.requests += requests;
        this.queries += queries;
        this.hits += hits;
        while (this.queue.length - this.head > 1 && this.requests > this.maxRecentRequests) {
            const oldest = this.queue[this.head++]!;
            this.requests -= oldest.requests;
            this.queries -= oldest.queries;
            this.hits -= oldest.hits;
        }
        if (this.head > 1024 && this.head * 2 > this.queue.length) {
            this.queue.splice(0, this.head);
            this.head = 0;
        }
    }

    /** No lookups in the window (start, or after `reset`). */
    get empty(): boolean {
        return this.requests === 0;
    }

    /** Tokens hit / tokens queried in the window, 0..1; 0 when nothing was queried (as vLLM). */
    get hitRate(): number {
        return this.queries === 0 ? 0 : this.hits / this.queries;
    }

    reset(): void {
        this.queue.length = 0;
        this.head = 0;
        this.requests = 0;
        this.queries = 0;
        this.hits = 0;
    }
}
