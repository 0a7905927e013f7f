/**
 * Where the host's periodic stats work runs: the tick (time-series sample, log line, deltas to panels) and
 * a `/metrics` render take 0.3–2 ms of the host's thread each, and tokens reach their callers (the
 * benchmark, the API's streams, VS Code's chat) on that same thread. Run at whatever moment a timer or a
 * scrape fires, that work lands in the middle of a token's delivery now and then: at concurrency 1, about
 * one token in fifty, so it showed in the P99 inter-token latency. Here it runs in the gap right after an
 * engine step's outputs were handled (the next `setImmediate` after `onStep`), while the engine computes
 * the next step, which takes longer than the work in all but the cheapest steps.
 *
 * An engine that has not stepped for `maxWaitMs` is idle or in a long step (a prefill): work runs at once.
 * Otherwise it waits for the next step, at most `maxWaitMs`.
 */
export type QuietMomentsOptions = {
    /** Default 50 ms. */
    maxWaitMs?: number,
    now?: () => number,
    onError?: (error: unknown) => void
};

export class QuietMoments {
    private readonly maxWaitMs: number;
    private readonly now: () => number;
    private readonly onError: (error: unknown) => void;
    private lastStepAt = -Infinity;
    private pending: Array<() => void> = [];
    private immediate: NodeJS.Immediate | undefined;
    private fallback: NodeJS.Timeout | undefined;

    constructor(options: QuietMomentsOptions = {}) {
        this.maxWaitMs = options.maxWaitMs ?? 50;
        this.now = options.now ?? (() => performance.now());
        this.onError = options.onError ?? (() => undefined);
    }

    /** An engine step's outputs are being handled now: pending work runs once this turn is done. */
    onStep(): void {
        this.lastStepAt = this.now();
        if (this.pending.length > 0 && this.immediate === undefined)
            this.immediate = setImmediate(() => this.flush());
    }

    /** Runs `work` now if the engine is idle, else right after the next step (at most `maxWaitMs` from now). */
    run(work: () => void): void {
        if (this.now() - this.lastStepAt >= this.maxWaitMs) {
            this.safely(work);
            return;
        }
        this.pending.push(work);
        // Not unref'd: a caller awaiting `next()` keeps the process up for those few ms.
        this.fallback ??= setTimeout(() => this.flush(), this.maxWaitMs);
    }

    /** Resolves at the next quiet moment (see `run`). */
    async next(): Promise<void> {
        await new Promise<void>((resolve) => this.run(resolve));
    }

    get pendingCount(): number {
        return this.pending.length;
    }

    /** Runs what is pending now (nothing waits past disposal). */
    flush(): void {
        if (this.immediate !== undefined)
            clearImmediate(this.immediate);
        if (this.fallback !== undefined)
            clearTimeout(this.fallback);
        this.immediate = undefined;
        this.fallback = undefined;
        const works = this.pending;
        this.pending = [];
        for (const work of works)
            this.safely(work);
    }

    private safely(work: () => void): void {
        try {
            work();
        } catch (error) {
            this.onError(error);
        }
    }
}
