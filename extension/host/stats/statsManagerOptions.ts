import {nowMs} from "../../../common/clock.js";
import type {StatLogger} from "./loggers/statLogger.js";

export type StatsManagerOptions = {
    /**
     * The clock, epoch ms, never going backwards. It must be the clock the events' timestamps are on
     * (EngineClient's `nowMs`, host clock). Tests pass a fake one. Default: `nowMs`.
     */
    now?: () => number,
    /** Time-series sample interval. Default 1000 ms. */
    sampleIntervalMs?: number,
    /**
     * How often the manager re-evaluates the engine state (stalled?), takes due samples, lets the
     * loggers log and sends due deltas. 0 = no timer: call `tick()` yourself (tests). Default 250 ms.
     */
    tickIntervalMs?: number,
    /** "stalled" = no engine step for longer than this while requests run. Default 1000 ms. */
    stallThresholdMs?: number,
    /** Window of the throughput gauges and time series (tokens/s, requests/s). Default 5000 ms. */
    throughputWindowMs?: number,
    /**
     * Window of the prefix-cache hit rate gauge, in requests: the lookups of about the last this many
     * requests (vLLM's `CachingMetrics`, whose log line uses 1000). Default 1000.
     */
    prefixCacheWindowRequests?: number,
    /** Window of the exact percentiles. Default 5 minutes. */
    percentileWindowMs?: number,
    /** Values kept per metric for the percentiles (the oldest go first). Default 10,000. */
    maxWindowValues?: number,
    /** TTFTs and ITLs kept per client label for its percentiles (the oldest go first). Default 1000. */
    maxClientWindowValues?: number,
    /** Time-series points kept. Default 3600 (an hour at 1 s). */
    maxTimeSeriesPoints?: number,
    /** Requests kept for the waterfall. Default 500. */
    maxRecentRequests?: number,
    /** Top of the prompt/generation length buckets (vLLM's max_model_len). Default: the engine's context size at its first `ready`. */
    maxModelLen?: number,
    /** Stat loggers fed every update; more can be added with `addLogger`. Default none. */
    loggers?: StatLogger[],
    /** Where a throwing listener or logger is reported. Default: `process.emitWarning`. */
    onError?: (error: unknown) => void
};

export type ResolvedStatsManagerOptions = Required<Omit<StatsManagerOptions, "maxModelLen" | "loggers">> & {maxModelLen: number | undefined};

export const defaultStatsManagerOptions = {
    sampleIntervalMs: 1000,
    tickIntervalMs: 250,
    stallThresholdMs: 1000,
    throughputWindowMs: 5000,
    prefixCacheWindowRequests: 1000,
    percentileWindowMs: 5 * 60_000,
    maxWindowValues: 10_000,
    maxClientWindowValues: 1000,
    maxTimeSeriesPoints: 3600,
    maxRecentRequests: 500
} as const;

export class StatsOptionsError extends RangeError {
    override readonly name = "StatsOptionsError";
}

export function resolveStatsManagerOptions(options: StatsManagerOptions): ResolvedStatsManagerOptions {
    const resolved: ResolvedStatsManagerOptions = {
        now: options.now ?? nowMs,
        sampleIntervalMs: options.sampleIntervalMs ?? defaultStatsManagerOptions.sampleIntervalMs,
        tickIntervalMs: options.tickIntervalMs ?? defaultStatsManagerOptions.tickIntervalMs,
        stallThresholdMs: options.stallThresholdMs ?? defaultStatsManagerOptions.stallThresholdMs,
        throughputWindowMs: options.throughputWindowMs ?? defaultStatsManagerOptions.throughputWindowMs,
        prefixCacheWindowRequests: options.prefixCacheWindowRequests ?? defaultStatsManagerOptions.prefixCacheWindowRequests,
        percentileWindowMs: options.percentileWindowMs ?? defaultStatsManagerOptions.percentileWindowMs,
        maxWindowValues: options.maxWindowValues ?? defaultStatsManagerOptions.maxWindowValues,
        maxClientWindowValues: options.maxClientWindowValues ?? defaultStatsManagerOptions.maxClientWindowValues,
        maxTimeSeriesPoints: options.maxTimeSeriesPoints ?? defaultStatsManagerOptions.maxTimeSeriesPoints,
        maxRecentRequests: options.maxRecentRequests ?? defaultStatsManagerOptions.maxRecentRequests,
        maxModelLen: options.maxModelLen,
        onError: options.onError ?? ((error: unknown) => process.emitWarning(`inference-monitor stats: ${String(error)}`))
    };
    const positive = ["sampleIntervalMs", "stallThresholdMs", "throughputWindowMs", "percentileWindowMs"] as const;
    for (const key of positive)
        if (!(resolved[key] > 0) || !Number.isFinite(resolved[key]))
            throw new StatsOptionsError(`${key} must be a positive number, got ${resolved[key]}`);
    const counts = ["prefixCacheWindowRequests", "maxWindowValues", "maxClientWindowValues", "maxTimeSeriesPoints", "maxRecentRequests"] as const;
    for (const key of counts)
        if (!Number.isInteger(resolved[key]) || resolved[key] < 1)
            throw new StatsOptionsError(`${key} must be a positive integer, got ${resolved[key]}`);
    if (!(resolved.tickIntervalMs >= 0) || !Number.isFinite(resolved.tickIntervalMs))
        throw new StatsOptionsError(`tickIntervalMs must be >= 0, got ${resolved.tickIntervalMs}`);
    if (resolved.maxModelLen !== undefined && !(Number.isInteger(resolved.maxModelLen) && resolved.maxModelLen >= 1))
        throw new StatsOptionsError(`maxModelLen must be a positive integer, got ${resolved.maxModelLen}`);
    return resolved;
}
