/**
 * What StatsManager shows its views: a full snapshot for a view that opens, then compact deltas.
 * Everything here is plain JSON (no classes, no undefined-valued keys, no Infinity/NaN).
 *
 * Units: timestamps are epoch milliseconds on the host clock; derived durations are **seconds**
 * (like vLLM's metrics, e.g. `ttftS`); lengths are tokens; usage fractions are 0..1.
 */
import type {EngineInfo, FinishReason} from "./engineMessages.js";
import type {RequestLifecycle} from "./requestLifecycle.js";
import type {TargetView} from "./targetView.js";

/** What the engine is doing, as the panel shows it. */
export const engineStateNames = ["loading", "idle", "busy", "stalled", "crashed", "stopped"] as const;
export type EngineStateName = typeof engineStateNames[number];

export const latencyMetrics = ["ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference"] as const;
/** Durations in seconds: time to first token, inter-token latency, time per output token, e2e, and the phases. */
export type LatencyMetric = typeof latencyMetrics[number];

export const lengthMetrics = ["promptTokens", "generationTokens"] as const;
/** Per-request lengths in tokens. */
export type LengthMetric = typeof lengthMetrics[number];

export const histogramMetrics = [...latencyMetrics, ...lengthMetrics] as const;
export type HistogramMetric = LatencyMetric | LengthMetric;

/**
 * A histogram with Prometheus bucket semantics (value <= bound). `counts` are per bucket, NOT
 * cumulative, and have one more entry than `bounds`: the overflow (+Inf) bucket.
 */
export type HistogramView = {bounds: number[], counts: number[], sum: number, count: number};

/** Exact statistics of the values recorded in the percentile window (numpy-style linear percentiles). */
export type PercentileSummary = {
    count: number,
    mean: number | null,
    p50: number | null,
    p90: number | null,
    p99: number | null,
    max: number | null
};

/**
 * How requests ended. Invariant at every moment: arrived = completed + failed + aborted + inFlight,
 * with completed = stop + length, failed = error, aborted = abort.
 */
export type RequestLedgerView = {
    arrived: number,
    inFlight: number,
    completed: number,
    failed: number,
    aborted: number,
    byReason: Record<FinishReason, number>
};

export type StatsCounters = {
    /** Prompt tokens prefilled (counted when a request's first token arrives, as vLLM does). */
    promptTokens: number,
    /** Generated tokens, counted as they arrive. */
    generationTokens: number,
    requests: RequestLedgerView,
    preemptions: number,
    /**
     * Prefix-cache lookups (vLLM's `vllm:prefix_cache_queries` / `_hits`), in tokens: when a request is
     * first scheduled, its prompt tokens are queried and its cached tokens (RequestLifecycle.cachedTokens) hit.
     */
    prefixCacheQueries: number,
    prefixCacheHits: number,
    /**
     * Prompt-cache lookups (vLLM's `vllm:external_prefix_cache_queries` / `_hits`, a KV connector's), in tokens: when an
     * engine with a prompt cache first schedules a request, its prompt tokens are queried and those restored from a saved
     * state hit. Those are not in `prefixCacheHits`, which counts what a sequence still held.
     */
    externalPrefixCacheQueries: number,
    externalPrefixCacheHits: number,
    /** Messages refused by the host, the engine or the stats channel. */
    rejectedMessages: number,
    /** Lifecycle events for requests this manager does not track (unknown id, already finished, duplicate arrival). */
    ignoredEvents: number
};

export type StatsGauges = {
    running: number,
    waiting: number,
    kvUsedTokens: number,
    kvCapacityTokens: number,
    /** kvUsedTokens / kvCapacityTokens, 0..1 (0 when the capacity is unknown). */
    kvCacheUsage: number,
    vramUsedBytes: number,
    vramTotalBytes: number,
    /** Time since the engine last finished a step while requests run; 0 when nothing runs. */
    msSinceLastStep: number,
    /** Sliding-window throughputs (window: `throughputWindowMs`). */
    promptTokensPerS: number,
    generationTokensPerS: number,
    /** Finished requests (any reason) per second. */
    requestsPerS: number,
    /**
     * Prefix-cache hits / queries (tokens), 0..1, over the lookups of the most recent requests
     * (`prefixCacheWindowRequests`, default 1000; vLLM's CachingMetrics). 0 when nothing was queried.
     */
    prefixCacheHitRate: number,
    /** The prompt cache's hits / queries (tokens), 0..1, over the same window; 0 when nothing was queried. */
    externalPrefixCacheHitRate: number
};

/**
 * The most recent active period that has ended: from a request arriving while none was in flight to
 * the last in-flight request's finish (its own timestamps: arrival, and the finish's delivery). Its
 * rates are averages over the whole period (tokens or finished requests ÷ its duration, as vLLM's
 * benchmark computes its throughputs), so an idle view can still say how fast the last work went
 * while the windowed gauges have dropped to 0. A period that is still going is not here: while
 * requests are in flight, the gauges are the live rates.
 */
export type ActivePeriodView = {
    startedAt: number,
    endedAt: number,
    /** Prompt tokens prefilled, tokens generated and requests finished (any reason) during the period. */
    promptTokens: number,
    generationTokens: number,
    requests: number,
    /** The counts above ÷ the period's duration; 0 for a period of no duration. */
    promptTokensPerS: number,
    generationTokensPerS: number,
    requestsPerS: number
};

/** One sample of the time series, taken every `sampleIntervalMs`. */
export type TimeSeriesPoint = {
    t: number,
    promptTokensPerS: number,
    generationTokensPerS: number,
    requestsPerS: number,
    /** Percentiles of the values recorded since the previous sample; null when there were none. */
    ttftP50S: number | null,
    ttftP99S: number | null,
    itlP50S: number | null,
    itlP99S: number | null,
    running: number,
    waiting: number,
    kvCacheUsage: number,
    vramUsedBytes: number
};

export type StatsConfigView = {
    sampleIntervalMs: number,
    throughputWindowMs: number,
    percentileWindowMs: number,
    stallThresholdMs: number,
    maxRecentRequests: number
};

/** At most this many client labels get their own row; requests of later new labels count in {@link otherClientLabel}'s. */
export const maxClients = 32;
/** The row of the labels beyond {@link maxClients} (a client that calls itself "other" shares it). */
export const otherClientLabel = "other";

/**
 * One client label's requests since start or reset (the label is `RequestLifecycle.client`). Invariant,
 * as the global ledger's: arrived = completed + failed + aborted + inFlight.
 */
export type ClientStatsView = {
    client: string,
    arrived: number,
    inFlight: number,
    /** Finished with reason stop or length. */
    completed: number,
    /** Finished with reason error. */
    failed: number,
    /** Finished with reason abort. */
    aborted: number,
    /** Sums over the client's finished requests of their final prompt / generated token counts. */
    promptTokens: number,
    generationTokens: number,
    /**
     * Percentiles (seconds) of the client's most recent TTFTs and ITLs within the percentile window
     * (at most `maxClientWindowValues` values each); null when there are none.
     */
    ttftP50S: number | null,
    ttftP99S: number | null,
    itlP50S: number | null,
    itlP99S: number | null
};

/** Everything a freshly opened view needs. */
export type StatsSnapshotView = {
    t: number,
    config: StatsConfigView,
    engine: EngineInfo | null,
    state: EngineStateName,
    counters: StatsCounters,
    gauges: StatsGauges,
    percentiles: Record<HistogramMetric, PercentileSummary>,
    histograms: Record<HistogramMetric, HistogramView>,
    /** Oldest first. */
    timeSeries: TimeSeriesPoint[],
    /** The most recent requests (by arrival), oldest first. */
    requests: RequestLifecycle[],
    /** Per client label, in order of first arrival since start or reset (the "other" row after the named ones). */
    clients: ClientStatsView[],
    /** The watched servers, when the numbers come from servers this host polls; null for our own engine. */
    target: TargetView | null,
    /** The last active period that ended (since start or reset); null before one has. */
    lastActive: ActivePeriodView | null
};

/**
 * What changed since the previous delta to the same subscriber (or since it subscribed). Only keys
 * that changed are present; a section's present keys replace the view's values whole.
 */
export type StatsDelta = {
    t: number,
    /** 1, 2, 3… per subscriber; a gap means a lost delta (re-request a snapshot). */
    seq: number,
    /** The engine's info whenever it changed: another engine became ready (a restart, another model). */
    engine?: EngineInfo | null,
    state?: EngineStateName,
    counters?: Partial<StatsCounters>,
    gauges?: Partial<StatsGauges>,
    percentiles?: Partial<Record<HistogramMetric, PercentileSummary>>,
    histograms?: Partial<Record<HistogramMetric, HistogramView>>,
    /** New points, oldest first. */
    timeSeries?: TimeSeriesPoint[],
    /** New or updated requests (replace by id). Views keep at most `maxRecentRequests`, dropping the oldest. */
    requests?: RequestLifecycle[],
    /** The whole per-client table, when any of it changed (replaces the view's). */
    clients?: ClientStatsView[],
    /** The watched servers' view, whole, when any of it changed. */
    target?: TargetView | null,
    /** The last ended active period, whole, when another one ended (or null after a reset). */
    lastActive?: ActivePeriodView | null,
    /** After `reset()`: drop everything and start again from this snapshot. */
    reset?: StatsSnapshotView
};

/** Totals to check a benchmark's own client-side counts against. */
export type BenchTotals = {
    requests: RequestLedgerView,
    /** vLLM-style counters (prompt tokens counted at prefill, generation tokens as they arrive). */
    promptTokens: number,
    generationTokens: number,
    /** Sums over finished requests of their final prompt/generated token counts (what clients see). */
    finishedPromptTokens: number,
    finishedGenerationTokens: number
};
