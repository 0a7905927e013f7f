/**
 * The one interface every stat logger implements (vLLM's `StatLoggerBase`): StatsManager calls
 * `record` once per engine step with vLLM's `(scheduler_stats, iteration_stats)` pair, and `log` once
 * per tick with the current gauges; a logger keeps whatever it needs and acts on its own interval.
 * Adding a logger needs no change to StatsManager: pass it in `loggers` or call `addLogger`.
 */
import type {EngineInfo} from "../../../../protocol/engineMessages.js";
import type {EngineStateName} from "../../../../protocol/statsView.js";
import type {IterationStats, SchedulerStats} from "../../engineClient/engineStep.js";
import type {RejectedMessage} from "../../engineClient/engineObserver.js";

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

export interface StatLogger {
    /** The engine is ready (again); `maxModelLen` sizes the length histograms' buckets. */
    recordEngine(info: EngineInfo, maxModelLen: number): void,
    /**
     * Once per engine step, in order (no scheduler stats for host-side changes: arrivals, requests
     * ended on the host). Must be cheap and must not throw.
     */
    record(scheduler: SchedulerStats | undefined, iteration: IterationStats): void,
    /** A message was refused by the host, the engine or the stats channel. */
    recordRejected(source: RejectedMessage["source"]): void,
    /** On every StatsManager tick (default every 250 ms), with the current gauges. */
    log(now: number, gauges: EngineGaugeValues): void,
    /** StatsManager.reset() was called. Cumulative exporters (Prometheus) ignore it. */
    reset(now: number): void,
    /** Releases what the logger holds (timers, sockets). StatsManager.dispose() calls it. */
    dispose(): void | Promise<void>
}
