/**
 * The stats pipeline attached to one EngineClient: StatsManager plus its loggers. Created only when
 * stats are on; disposing it detaches everything, so stats off costs nothing.
 */
export interface StatsSession {
    /** Totals StatsManager has counted, for checking it against a benchmark's own counts. */
    totals(): {promptTokens: number, generationTokens: number, finished: number},
    dispose(): Promise<void>
}
