/** How often a client may ask for something costly: `burst` at once, then `perSecond` on average. */
export type RateLimit = {burst: number, perSecond: number};

/**
 * A token bucket: holds up to `burst` tokens, refilled at `perSecond`; each allowed request takes one.
 * A request that finds the bucket empty is refused (the caller drops it), never queued.
 */
export class TokenBucket {
    private tokens: number;
    private last: number;

    constructor(private readonly limit: RateLimit, private readonly now: () => number = () => performance.now()) {
        if (!(limit.burst >= 1) || !(limit.perSecond > 0))
            throw new RangeError(`a rate limit needs burst >= 1 and perSecond > 0, got ${JSON.stringify(limit)}`);
        this.tokens = limit.burst;
        this.last = now();
    }

    /** Takes a token if there is one; false when the caller is over its rate. */
    take(): boolean {
        this.refill();
        if (this.tokens < 1)
            return false;
        this.tokens -= 1;
        return true;
    }

    /** Milliseconds until a token is there (0 when one is). */
    msUntilToken(): number {
        this.refill();
        return this.tokens >= 1 ? 0 : Math.ceil((1 - this.tokens) / this.limit.perSecond * 1000);
    }

    private refill(): void {
        const t = this.now();
        this.tokens = Math.min(this.limit.burst, this.tokens + (t - this.last) / 1000 * this.limit.perSecond);
        this.last = t;
    }
}
