/**
 * What EngineClient hands its observers per engine step: vLLM's `(scheduler_stats, iteration_stats)`
 * pair. One outputs message from the engine is one step; a few lifecycle changes that happen on the
 * host (arrival, a request failed before reaching the engine, the engine gone) are steps without
 * scheduler stats.
 */
import type {StepStats} from "../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";

/** The engine's state after the step (its `StepStats`, `t` on the host clock). */
export type SchedulerStats = StepStats;

/** What the step did to requests, derived from their lifecycles (vLLM's `IterationStats`). */
export type IterationStats = {
    /** Host time the step's outputs were received (or the host-side change happened). */
    t: number,
    /** Requests that entered the host in this iteration. */
    arrived: RequestLifecycle[],
    /** Every request whose lifecycle changed (arrived and finished ones included). */
    updated: RequestLifecycle[],
    /** Requests that finished; their lifecycle and metrics are final. */
    finished: RequestLifecycle[],
    /** Prompt tokens of requests whose prefill completed (their first tokens arrived), as vLLM counts them. */
    promptTokens: number,
    generationTokens: number,
    /** Seconds, one per request that got its first tokens. */
    ttftS: number[],
    /** Seconds between consecutive tokens of one request. */
    itlS: number[],
    /** The client label of each `itlS` sample (same length, same order): who the gap was measured for. */
    itlClients: string[],
    preemptions: number,
    /**
     * Prefix-cache lookups in this step, in vLLM's terms (its `PrefixCacheStats`): one per request first
     * scheduled; `prefixCacheQueries` are their prompt tokens (looked up), `prefixCacheHits` the
     * leading ones found on a sequence's KV cache (the lifecycle's `cachedTokens`, less those restored from the
     * prompt cache). With caching off the engine reports no hits, so every lookup misses.
     */
    prefixCacheRequests: number,
    prefixCacheQueries: number,
    prefixCacheHits: number,
    /**
     * Prompt-cache lookups (EngineOptions.promptCacheMiB), in vLLM's terms for a KV connector's cache (its
     * `vllm:external_prefix_cache_*`): one per request first scheduled by an engine with a prompt cache; queries are its
     * prompt tokens, hits the leading ones restored from a saved state.
     */
    externalPrefixCacheRequests: number,
    externalPrefixCacheQueries: number,
    externalPrefixCacheHits: number
};

export type EngineStep = {scheduler?: SchedulerStats, iteration: IterationStats};

export function emptyIteration(t: number): IterationStats {
    return {t, arrived: [], updated: [], finished: [], promptTokens: 0, generationTokens: 0, ttftS: [], itlS: [], itlClients: [],
        preemptions: 0, prefixCacheRequests: 0, prefixCacheQueries: 0, prefixCacheHits: 0,
        externalPrefixCacheRequests: 0, externalPrefixCacheQueries: 0, externalPrefixCacheHits: 0};
}
