import {Registry} from "prom-client";
import {finishReasons} from "../../../../protocol/engineMessages.js";
import {engineStateNames} from "../../../../protocol/statsView.js";
import {MetricsHttpServer, type MetricsBody} from "./metricsHttpServer.js";
import {VllmMetrics, type BaseLabel} from "./prometheusMetrics.js";
import {servedModelId} from "../../servedModelId.js";
import type {EngineInfo} from "../../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../../protocol/requestLifecycle.js";
import type {RejectedMessage} from "../../engineClient/engineObserver.js";
import type {IterationStats, SchedulerStats} from "../../engineClient/engineStep.js";
import type {EngineGaugeValues, StatLogger} from "./statLogger.js";

export type PrometheusStatLoggerOptions = {
    /** Port of the `/metrics` endpoint; 0 picks a free one (see `port` after start). Default 0. */
    port?: number,
    /** Address to listen on. Default "127.0.0.1" (local only). */
    host?: string,
    /** Serve HTTP at all; false = only `metrics()` (e.g. to mount on another server). Default true. */
    serve?: boolean,
    /** The `model_name` label. Default: the engine's served model id (servedModelId.ts) once it is ready ("unknown" before). */
    modelName?: string,
    /** Top of the prompt/generation length buckets. Default: the engine's context size at its first `ready`. */
    maxModelLen?: number,
    /** The `engine` label. Default 0. */
    engineIndex?: number,
    /**
     * Families shared with other loggers (one per engine or watched server, each with its own `engine`
     * label), rendered together by `registry.metrics()` of the shared registry. Default: its own.
     */
    sharedMetrics?: VllmMetrics,
    /** Awaited before each `render()`: StatsPipeline waits for a quiet moment (quietMoments.ts). */
    beforeRender?: () => Promise<void>
};

const maxPendingLengths = 10_000;

type Labels = Record<BaseLabel, string>;

/**
 * Exports StatsManager's metrics in Prometheus text format with vLLM V1's names, on its own registry
 * (never prom-client's global one). Counters and histograms are cumulative for the life of the
 * logger: StatsManager.reset() does not reset them (Prometheus expects monotonic counters).
 */
export class PrometheusStatLogger implements StatLogger {
    readonly registry: Registry;
    private readonly metrics: VllmMetrics;
    /** The labels of this logger's vllm:cache_config_info series, to replace only its own. */
    private cacheConfigLabels: Record<string, string> | undefined;
    private labels: Labels;
    private readonly fixedModelName: string | undefined;
    /** Finished requests seen before the length buckets were known; replayed once they are. */
    private pendingLengths: Array<{labels: Labels, request: RequestLifecycle}> = [];
    /** Label sets whose series exist (prom-client's `zero` would wipe an existing histogram). */
    private readonly initialized: Labels[] = [];
    private server: MetricsHttpServer | undefined;

    private constructor(private readonly options: PrometheusStatLoggerOptions) {
        this.metrics = options.sharedMetrics ?? new VllmMetrics(new Registry());
        this.registry = this.metrics.registry;
        this.fixedModelName = options.modelName;
        this.labels = {model_name: options.modelName ?? "unknown", engine: String(options.engineIndex ?? 0)};
        if (options.maxModelLen !== undefined)
            this.metrics.createLengthHistograms(options.maxModelLen);
        if (options.modelName !== undefined)
            this.initializeSeries(this.labels);
    }

    /** Creates the logger and (unless `serve: false`) starts its HTTP endpoint; throws PortInUseError. */
    static async start(options: PrometheusStatLoggerOptions = {}): Promise<PrometheusStatLogger> {
        const logger = new PrometheusStatLogger(options);
        if (options.serve ?? true)
            logger.server = await MetricsHttpServer.listen(options.host ?? "127.0.0.1", options.port ?? 0, async () => await logger.render());
        return logger;
    }

    /** The bound port (the real one when started with port 0); undefined when not serving. */
    get port(): number | undefined {
        return this.server?.port;
    }

    /** e.g. `http://127.0.0.1:9464/metrics`; undefined when not serving. */
    get url(): string | undefined {
        return this.server?.url;
    }

    /** What `/metrics` answers, here or on a server this logger is mounted on: after `beforeRender`, the exposition. */
    async render(): Promise<MetricsBody> {
        await this.options.beforeRender?.();
        return {contentType: this.registry.contentType, body: await this.registry.metrics()};
    }

    /** The exposition text, as `/metrics` serves it. */
    async metricsText(): Promise<string> {
        return await this.registry.metrics();
    }

    recordEngine(info: EngineInfo, maxModelLen: number): void {
        const m = this.metrics;
        const modelName = servedModelId(info);
        if (this.fixedModelName === undefined && modelName !== this.labels.model_name)
            this.relabel(modelName);
        this.initializeSeries(this.labels);
        // Our KV cache is cells, one token each: blocks of size 1.
        if (this.cacheConfigLabels !== undefined)
            m.cacheConfigInfo.remove(this.cacheConfigLabels);
        this.cacheConfigLabels = {engine: this.labels.engine, block_size: "1", num_gpu_blocks: String(info.contextSize * info.parallel),
            enable_prefix_caching: info.prefixCache ? "True" : "False"};
        m.cacheConfigInfo.set(this.cacheConfigLabels, 1);
        if (m.lengths === undefined) {
            const lengths = m.createLengthHistograms(this.options.maxModelLen ?? maxModelLen);
            for (const initialized of this.initialized)
                for (const histogram of lengths)
                    histogram.zero(initialized);
            for (const pending of this.pendingLengths)
                this.observeLengths(pending.labels, pending.request);
            this.pendingLengths = [];
        }
    }

    record(scheduler: SchedulerStats | undefined, iteration: IterationStats): void {
        const m = this.metrics;
        const labels = this.labels;
        if (scheduler !== undefined && scheduler.stepTokens > 0)
            m.iterationTokens.observe(labels, scheduler.stepTokens);
        if (iteration.promptTokens > 0)
            m.promptTokens.inc(labels, iteration.promptTokens);
        if (iteration.generationTokens > 0)
            m.generationTokens.inc(labels, iteration.generationTokens);
        for (const ttft of iteration.ttftS)
            m.ttft.observe(labels, ttft);
        for (const itl of iteration.itlS)
            m.itl.observe(labels, itl);
        if (iteration.preemptions > 0)
            m.preemptions.inc(labels, iteration.preemptions);
        if (iteration.prefixCacheRequests > 0) {
            m.prefixCacheQueries.inc(labels, iteration.prefixCacheQueries);
            m.prefixCacheHits.inc(labels, iteration.prefixCacheHits);
        }
        if (iteration.externalPrefixCacheRequests > 0) {
            m.externalPrefixCacheQueries.inc(labels, iteration.externalPrefixCacheQueries);
            m.externalPrefixCacheHits.inc(labels, iteration.externalPrefixCacheHits);
        }
        for (const request of iteration.finished)
            this.recordFinished(labels, request);
    }

    recordRejected(source: RejectedMessage["source"]): void {
        this.metrics.rejectedMessages.inc({...this.labels, source});
    }

    log(_now: number, gauges: EngineGaugeValues): void {
        const m = this.metrics;
        const labels = this.labels;
        m.running.set(labels, gauges.running);
        m.waiting.set(labels, gauges.waiting);
        m.kvCacheUsage.set(labels, gauges.kvCacheUsage);
        m.engineStall.set(labels, gauges.msSinceLastStep / 1000);
        m.vramUsed.set(labels, gauges.vramUsedBytes);
        m.vramTotal.set(labels, gauges.vramTotalBytes);
        for (const state of engineStateNames)
            m.engineState.set({...labels, state}, state === gauges.state ? 1 : 0);
    }

    reset(): void {}

    async dispose(): Promise<void> {
        const server = this.server;
        this.server = undefined;
        await server?.close();
    }

    private recordFinished(labels: Labels, request: RequestLifecycle): void {
        const m = this.metrics;
        const metrics = request.metrics;
        m.requestSuccess.inc({...labels, finished_reason: request.reason ?? "error"});
        if (metrics.e2eS !== undefined) m.e2e.observe(labels, metrics.e2eS);
        if (metrics.queueS !== undefined) m.queue.observe(labels, metrics.queueS);
        if (metrics.prefillS !== undefined) m.prefill.observe(labels, metrics.prefillS);
        if (metrics.inferenceS !== undefined) m.inference.observe(labels, metrics.inferenceS);
        if (metrics.decodeS !== undefined) m.decode.observe(labels, metrics.decodeS);
        if (metrics.tpotS !== undefined) m.tpot.observe(labels, metrics.tpotS);
        if (m.lengths !== undefined)
            this.observeLengths(labels, request);
        else if (this.pendingLengths.push({labels, request}) > maxPendingLengths)
            this.pendingLengths.shift();
    }

    private observeLengths(labels: Labels, request: RequestLifecycle): void {
        const lengths = this.metrics.lengths!;
        lengths.prompt.observe(labels, request.promptTokens);
        lengths.generation.observe(labels, request.generatedTokens);
        if (request.maxTokens > 0)
            lengths.maxTokens.observe(labels, request.maxTokens);
    }

    /** A new model name: gauges of the old one go (they would be stale); counters and histograms stay (they are true). */
    private relabel(modelName: string): void {
        const old = this.labels;
        const m = this.metrics;
        for (const gauge of [m.running, m.waiting, m.kvCacheUsage, m.engineStall, m.vramUsed, m.vramTotal])
            gauge.remove(old);
        for (const state of engineStateNames)
            m.engineState.remove({...old, state});
        this.labels = {...old, model_name: modelName};
    }

    /**
     * Like vLLM (prometheus_client creates a series on `.labels()`), every series of a model exists
     * from the start, at 0 — from the moment the model name is known (series observed before that
     * carry model_name "unknown").
     */
    private initializeSeries(labels: Labels): void {
        if (this.initialized.some((known) => known.model_name === labels.model_name && known.engine === labels.engine))
            return;
        this.initialized.push({...labels});
        const m = this.metrics;
        for (const histogram of [m.ttft, m.itl, m.e2e, m.queue, m.prefill, m.decode, m.inference, m.tpot, m.iterationTokens])
            histogram.zero(labels);
        if (m.lengths !== undefined)
            for (const histogram of [m.lengths.prompt, m.lengths.generation, m.lengths.maxTokens])
                histogram.zero(labels);
        for (const counter of [m.promptTokens, m.generationTokens, m.preemptions, m.prefixCacheQueries, m.prefixCacheHits,
            m.externalPrefixCacheQueries, m.externalPrefixCacheHits])
            counter.inc(labels, 0);
        for (const reason of finishReasons)
            m.requestSuccess.inc({...labels, finished_reason: reason}, 0);
        for (const gauge of [m.running, m.waiting, m.kvCacheUsage, m.engineStall, m.vramUsed, m.vramTotal])
            gauge.inc(labels, 0);
    }
}
