/**
 * The metric families on `/metrics`: vLLM V1's names, types, help texts, labels (`model_name`,
 * `engine`) and buckets, so dashboards and alerts written for vLLM work unchanged — plus a few
 * extras of ours under the same `vllm:` namespace where vLLM has nothing (marked EXTRA below).
 */
import {Counter, Gauge, Histogram, type Registry} from "prom-client";
import {buildOneTwoFiveBuckets, iterationTokensBuckets, requestLatencyBucketsS, tokenLatencyBucketsS, ttftBucketsS} from "../buckets.js";

export type BaseLabel = "model_name" | "engine";

/** Names of every family this exporter can show (vLLM's first, then our extras). */
export const vllmMetricNames = {
    ttft: "vllm:time_to_first_token_seconds",
    itl: "vllm:inter_token_latency_seconds",
    e2e: "vllm:e2e_request_latency_seconds",
    queue: "vllm:request_queue_time_seconds",
    prefill: "vllm:request_prefill_time_seconds",
    decode: "vllm:request_decode_time_seconds",
    inference: "vllm:request_inference_time_seconds",
    tpot: "vllm:request_time_per_output_token_seconds",
    promptTokensRequest: "vllm:request_prompt_tokens",
    generationTokensRequest: "vllm:request_generation_tokens",
    maxTokensRequest: "vllm:request_params_max_tokens",
    iterationTokens: "vllm:iteration_tokens_total",
    running: "vllm:num_requests_running",
    waiting: "vllm:num_requests_waiting",
    kvCacheUsage: "vllm:kv_cache_usage_perc",
    cacheConfigInfo: "vllm:cache_config_info",
    promptTokens: "vllm:prompt_tokens_total",
    generationTokens: "vllm:generation_tokens_total",
    requestSuccess: "vllm:request_success_total",
    preemptions: "vllm:num_preemptions_total",
    prefixCacheQueries: "vllm:prefix_cache_queries_total",
    prefixCacheHits: "vllm:prefix_cache_hits_total",
    externalPrefixCacheQueries: "vllm:external_prefix_cache_queries_total",
    externalPrefixCacheHits: "vllm:external_prefix_cache_hits_total",
    // EXTRA (not in vLLM):
    engineStall: "vllm:engine_stall_seconds",
    engineState: "vllm:engine_state",
    vramUsed: "vllm:vram_used_bytes",
    vramTotal: "vllm:vram_total_bytes",
    rejectedMessages: "vllm:rejected_messages_total"
} as const;

const baseLabels: BaseLabel[] = ["model_name", "engine"];

/** The prom-client objects, all registered on one (non-global) registry. */
export class VllmMetrics {
    readonly ttft: Histogram<BaseLabel>;
    readonly itl: Histogram<BaseLabel>;
    readonly e2e: Histogram<BaseLabel>;
    readonly queue: Histogram<BaseLabel>;
    readonly prefill: Histogram<BaseLabel>;
    readonly decode: Histogram<BaseLabel>;
    readonly inference: Histogram<BaseLabel>;
    readonly tpot: Histogram<BaseLabel>;
    readonly iterationTokens: Histogram<BaseLabel>;
    readonly running: Gauge<BaseLabel>;
    readonly waiting: Gauge<BaseLabel>;
    readonly kvCacheUsage: Gauge<BaseLabel>;
    readonly promptTokens: Counter<BaseLabel>;
    readonly generationTokens: Counter<BaseLabel>;
    readonly requestSuccess: Counter<BaseLabel | "finished_reason">;
    readonly preemptions: Counter<BaseLabel>;
    readonly prefixCacheQueries: Counter<BaseLabel>;
    readonly prefixCacheHits: Counter<BaseLabel>;
    readonly externalPrefixCacheQueries: Counter<BaseLabel>;
    readonly externalPrefixCacheHits: Counter<BaseLabel>;
    readonly engineStall: Gauge<BaseLabel>;
    readonly engineState: Gauge<BaseLabel | "state">;
    readonly vramUsed: Gauge<BaseLabel>;
    readonly vramTotal: Gauge<BaseLabel>;
    readonly rejectedMessages: Counter<BaseLabel | "source">;
    /** vLLM's info gauge (value 1) whose labels give the KV cache's size: `num_gpu_blocks` × `block_size` tokens. */
    readonly cacheConfigInfo: Gauge<"engine" | "block_size" | "num_gpu_blocks" | "enable_prefix_caching">;
    /** Length histograms: their buckets run up to the model's max length, so they exist once it is known. */
    lengths: {prompt: Histogram<BaseLabel>, generation: Histogram<BaseLabel>, maxTokens: Histogram<BaseLabel>} | undefined;

    constructor(readonly registry: Registry) {
        const registers = [registry];
        const histogram = (name: string, help: string, buckets: readonly number[]): Histogram<BaseLabel> =>
            new Histogram({name, help, labelNames: baseLabels, buckets: [...buckets], registers});
        const gauge = (name: string, help: string): Gauge<BaseLabel> => new Gauge({name, help, labelNames: baseLabels, registers});
        const counter = (name: string, help: string): Counter<BaseLabel> => new Counter({name, help, labelNames: baseLabels, registers});
        const n = vllmMetricNames;

        this.running = gauge(n.running, "Number of requests in model execution batches.");
        this.cacheConfigInfo = new Gauge({
            name: n.cacheConfigInfo, help: "Information of the LLMEngine CacheConfig",
            labelNames: ["engine", "block_size", "num_gpu_blocks", "enable_prefix_caching"], registers
        });
        this.waiting = gauge(n.waiting, "Number of requests waiting to be processed.");
        this.kvCacheUsage = gauge(n.kvCacheUsage, "KV-cache usage. 1 means 100 percent usage.");
        this.preemptions = counter(n.preemptions, "Cumulative number of preemption from the engine.");
        this.prefixCacheQueries = counter(n.prefixCacheQueries, "Prefix cache queries, in terms of number of queried tokens.");
        this.prefixCacheHits = counter(n.prefixCacheHits, "Prefix cache hits, in terms of number of cached tokens.");
        this.externalPrefixCacheQueries = counter(n.externalPrefixCacheQueries,
            "External prefix cache queries (here: the prompt cache of saved sequence states), in terms of number of queried tokens.");
        this.externalPrefixCacheHits = counter(n.externalPrefixCacheHits,
            "External prefix cache hits (here: tokens restored from the prompt cache), in terms of number of cached tokens.");
        this.promptTokens = counter(n.promptTokens, "Number of prefill tokens processed.");
        this.generationTokens = counter(n.generationTokens, "Number of generation tokens processed.");
        this.requestSuccess = new Counter({
            name: n.requestSuccess, help: "Count of successfully processed requests.",
            labelNames: [...baseLabels, "finished_reason"], registers
        });
        this.iterationTokens = histogram(n.iterationTokens, "Histogram of number of tokens per engine_step.", iterationTokensBuckets);
        this.ttft = histogram(n.ttft, "Histogram of time to first token in seconds.", ttftBucketsS);
        this.itl = histogram(n.itl, "Histogram of inter-token latency in seconds.", tokenLatencyBucketsS);
        this.tpot = histogram(n.tpot, "Histogram of time_per_output_token_seconds per request.", tokenLatencyBucketsS);
        this.e2e = histogram(n.e2e, "Histogram of e2e request latency in seconds.", requestLatencyBucketsS);
        this.queue = histogram(n.queue, "Histogram of time spent in WAITING phase for request.", requestLatencyBucketsS);
        this.inference = histogram(n.inference, "Histogram of time spent in RUNNING phase for request.", requestLatencyBucketsS);
        this.prefill = histogram(n.prefill, "Histogram of time spent in PREFILL phase for request.", requestLatencyBucketsS);
        this.decode = histogram(n.decode, "Histogram of time spent in DECODE phase for request.", requestLatencyBucketsS);

        // EXTRA: not in vLLM.
        this.engineStall = gauge(n.engineStall,
            "Inference Monitor extra: seconds since the engine last finished a step while requests run (0 when none run).");
        this.engineState = new Gauge({
            name: n.engineState, help: "Inference Monitor extra: 1 for the engine's current state, 0 for the others.",
            labelNames: [...baseLabels, "state"], registers
        });
        this.vramUsed = gauge(n.vramUsed, "Inference Monitor extra: VRAM in use on the engine's GPU, bytes.");
        this.vramTotal = gauge(n.vramTotal, "Inference Monitor extra: total VRAM of the engine's GPU, bytes.");
        this.rejectedMessages = new Counter({
            name: n.rejectedMessages, help: "Inference Monitor extra: messages refused by the host, the engine or the stats channel.",
            labelNames: [...baseLabels, "source"], registers
        });
    }

    /** Creates the length histograms with vLLM's 1-2-5 buckets up to `maxModelLen` (once); returns them. */
    createLengthHistograms(maxModelLen: number): Array<Histogram<BaseLabel>> {
        if (this.lengths !== undefined)
            return [this.lengths.prompt, this.lengths.generation, this.lengths.maxTokens];
        const buckets = buildOneTwoFiveBuckets(maxModelLen);
        const registers = [this.registry];
        const make = (name: string, help: string): Histogram<BaseLabel> =>
            new Histogram({name, help, labelNames: baseLabels, buckets: [...buckets], registers});
        this.lengths = {
            prompt: make(vllmMetricNames.promptTokensRequest, "Number of prefill tokens processed."),
            generation: make(vllmMetricNames.generationTokensRequest, "Number of generation tokens processed."),
            maxTokens: make(vllmMetricNames.maxTokensRequest, "Histogram of the max_tokens request parameter.")
        };
        return [this.lengths.prompt, this.lengths.generation, this.lengths.maxTokens];
    }
}
