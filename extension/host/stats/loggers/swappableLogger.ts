import type {StatLogger, StatUpdate} from "./statLogger.js";

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

    record(update: StatUpdate): void {
        this.current?.record(update);
    }

    log(now: number): void {
        this.current?.log(now);
    }

    async dispose(): Promise<void> {
        await this.replace(undefined);
    }
}
