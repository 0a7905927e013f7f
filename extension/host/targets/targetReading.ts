/**
 * What one poll of a watched server says, in our terms, whatever the server's kind. Totals are the
 * server's cumulative counters (TargetMonitor turns them into rates and survives their resets);
 * `undefined` means the server does not report it, which the panel says instead of showing 0.
 */
import type {FinishReason} from "../../../protocol/engineMessages.js";
import type {HistogramMetric} from "../../../protocol/statsView.js";
import type {TargetKind, TargetSlotView} from "../../../protocol/targetView.js";
import type {BucketHistogram} from "./bucketHistogram.js";

export type TargetReading = {
    kind: TargetKind,
    /** The served model(s), as the server names them. */
    model: string | undefined,
    /** What the server says its own version or build is, when it says. */
    version?: string,
    running?: number,
    waiting?: number,
    /** Prompt tokens of requests whose prefill is done, cached ones included (vLLM's `prompt_tokens`). */
    promptTokensTotal?: number,
    generationTokensTotal?: number,
    preemptionsTotal?: number,
    prefixCacheQueriesTotal?: number,
    prefixCacheHitsTotal?: number,
    /** A KV connector's or offloading cache's lookups and hits in tokens (vLLM's `external_prefix_cache_*`), when it has one. */
    externalPrefixCacheQueriesTotal?: number,
    externalPrefixCacheHitsTotal?: number,
    /** Requests finished, by reason. */
    finishedTotal?: Partial<Record<FinishReason, number>>,
    kvUsedTokens?: number,
    kvCapacityTokens?: number,
    vramUsedBytes?: number,
    vramTotalBytes?: number,
    /** Tokens one sequence/slot holds. */
    contextSize?: number,
    /** Sequences / slots / data-parallel ranks serving at once, when known. */
    parallel?: number,
    /** Each slot (llama.cpp's `/slots`), when the server lists them. */
    slots?: TargetSlotView[],
    /** The server's own latency histograms (cumulative), for the metrics it exports. */
    histograms: Partial<Record<HistogramMetric, BucketHistogram>>,
    /** What this kind of server cannot tell (beyond the `undefined` fields), in words for the panel. */
    notes: string[]
};
