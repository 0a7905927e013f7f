import type {ActivePeriodView} from "../../../protocol/statsView.js";

/**
 * Active periods: one starts when a request arrives with none in flight (at its arrival) and ends when
 * the last one in flight finishes (at its finish's delivery); `last` is the most recent that ended.
 */
export class ActivityPeriods {
    /** The most recent period that ended; replaced whole (views may hold it). */
    last: ActivePeriodView | null = null;
    private current: {startedAt: number, promptTokens: number, generationTokens: number, requests: number} | undefined;

    start(at: number): void {
        this.current = {startedAt: at, promptTokens: 0, generationTokens: 0, requests: 0};
    }

    addTokens(promptTokens: number, generationTokens: number): void {
        if (this.current === undefined)
            return;
        this.current.promptTokens += promptTokens;
        this.current.generationTokens += generationTokens;
    }

    /** A request finished at `at`; `wasLast`: none is in flight any more, so the period ends there. */
    finishRequest(at: number, wasLast: boolean): void {
        const current = this.current;
        if (current === undefined)
            return;
        current.requests++;
        if (!wasLast)
            return;
        this.current = undefined;
        const endedAt = Math.max(current.startedAt, at);
        const seconds = (endedAt - current.startedAt) / 1000;
        const perS = (count: number): number => seconds > 0 ? count / seconds : 0;
        this.last = {
            startedAt: current.startedAt, endedAt,
            promptTokens: current.promptTokens, generationTokens: current.generationTokens, requests: current.requests,
            promptTokensPerS: perS(current.promptTokens), generationTokensPerS: perS(current.generationTokens),
            requestsPerS: perS(current.requests)
        };
    }

    /** Forgets every period; requests still in flight start a new one now. */
    reset(now: number, busy: boolean): void {
        this.last = null;
        this.current = undefined;
        if (busy)
            this.start(now);
    }
}
