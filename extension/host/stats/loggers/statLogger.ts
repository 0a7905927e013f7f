/**
 * The one interface every stat logger implements (vLLM's `StatLoggerBase`): StatsManager hands each
 * logger every update as it happens and calls `log` on its tick; a logger keeps whatever it needs.
 * Adding a logger needs no change to StatsManager: pass it in `loggers` or call `addLogger`.
 */
import type {EngineInfo, FinishReason} from "../../../../protocol/engineMessages.js";
import type {EngineStateName} from "../../../../protocol/statsView.js";

/** A finished request's metrics (seconds / tokens), as vLLM's `FinishedRequestStats`. */
export type FinishedRequestStats = {
    id: string,
    reason: FinishReason,
    /** Finish delivered to the host − arrival. */
    e2eS: number,
    /** scheduled − queued; absent if the request was never scheduled. */
    queueS?: number,
    /** firstToken − scheduled. */
    prefillS?: number,
    /** lastToken − firstToken. */
    decodeS?: number,
    /** lastToken − scheduled. */
    inferenceS?: number,
    /** decode / (generated − 1); absent when fewer than 2 tokens were generated. */
    tpotS?: number,
    promptTokens: number,
    generationTokens: number,
    /** The request's `maxTokens` parameter. */
    maxTokens: number
};

export type EngineGaugeValues = {
    state: EngineStateName,
    running: number,
    waiting: number,
    /** 0..1 */
    kvCacheUsage: number,
    vramUsedBytes: number,
    vramTotalBytes: number,
    msSinceLastStep: number
};

export type StatUpdate =
    /** The engine is ready (again); `maxModelLen` sizes the length histograms' buckets. */
    | {type: "engine", t: number, info: EngineInfo, maxModelLen: number}
    /** A request's new tokens; `promptTokens` > 0 on its first tokens (its prefill is done), with `ttftS`. */
    | {type: "tokens", t: number, requestId: string, promptTokens: number, generationTokens: number, ttftS?: number, itlS: number[]}
    | {type: "preempted", t: number, requestId: string}
    | {type: "finished", t: number, request: FinishedRequestStats}
    /** An engine step that evaluated `stepTokens` tokens (prompt + generated). */
    | {type: "step", t: number, stepTokens: number}
    /** Current gauges: on every step, stats snapshot, state change and manager tick. */
    | {type: "gauges", t: number, gauges: EngineGaugeValues}
    | {type: "rejected", t: number, source: string}
    /** StatsManager.reset() was called. Cumulative exporters (Prometheus) may ignore it. */
    | {type: "reset", t: number};

export interface StatLogger {
    /** Called synchronously for every update, in order. Must be cheap and must not throw. */
    record(update: StatUpdate): void;
    /** Called on every StatsManager tick (default every 250 ms); the logger acts on its own interval. */
    log(now: number): void;
    /** Releases what the logger holds (timers, sockets). StatsManager.dispose() calls it. */
    dispose(): void | Promise<void>;
}
