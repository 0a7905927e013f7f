import type {EngineInfo} from "../../../../protocol/engineMessages.js";
import type {RejectedMessage} from "../../engineClient/engineObserver.js";
import type {IterationStats, SchedulerStats} from "../../engineClient/engineStep.js";
import type {EngineGaugeValues, StatLogger} from "./statLogger.js";

/**
 * A logger slot whose logger can be replaced or removed while StatsManager runs (e.g. when a
 * setting changes the log interval or the Prometheus port), with no change to StatsManager.
 */
export class SwappableLogger implements StatLogger {
    private current: StatLogger | undefined;

    get logger(): StatLogger | undefined {
        return this.current;
    }

    /** Puts `next` in the slot and disposes the previous logger. */
    async replace(next: StatLogger | undefined): Promise<void> {
        const previous = this.current;
        this.current = next;
        await previous?.dispose();
    }

    recordEngine(info: EngineInfo, maxModelLen: number): void {
        this.current?.recordEngine(info, maxModelLen);
    }

    record(scheduler: SchedulerStats | undefined, iteration: IterationStats): void {
        this.current?.record(scheduler, iteration);
    }

    recordRejected(source: RejectedMessage["source"]): void {
        this.current?.recordRejected(source);
    }

    log(now: number, gauges: EngineGaugeValues): void {
        this.current?.log(now, gauges);
    }

    reset(now: number): void {
        this.current?.reset(now);
    }

    async dispose(): Promise<void> {
        await this.replace(undefined);
    }
}
