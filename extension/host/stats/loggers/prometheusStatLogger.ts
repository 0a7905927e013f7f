import {Registry} from "prom-client";
import {finishReasons} from "../../../../protocol/engineMessages.js";
import type {EngineStateName} from "../../../../protocol/statsView.js";
import {MetricsHttpServer} from "./metricsHttpServer.js";
import {VllmMetrics, type BaseLabel} from "./prometheusMetrics.js";
import type {FinishedRequestStats, StatLogger, StatUpdate} from "./statLogger.js";

export type PrometheusStatLoggerOptions = {
    /** Port of the `/metrics` endpoint; 0 picks a free one (see `port` after start). Default 0. */
    port?: number,
    /** Address to listen on. Default "127.0.0.1" (local only). */
    host?: string,
    /** Serve HTTP at all; false = only `metrics()` (e.g. to mount on another server). Default true. */
    serve?: boolean,
    /** The `model_name` label. Default: the engine's model name once it is ready ("unknown" before). */
    modelName?: string,
    /** Top of the prompt/generation length buckets. Default: the engine's context size at its first `ready`. */
    maxModelLen?: number,
    /** The `engine` label. Default 0. */
    engineIndex?: number
};

const engineStates: readonly EngineStateName[] = ["loading", "idle", "busy", "stalled", "crashed", "stopped"];
const maxPendingLengths = 10_000;

type Labels = Record<BaseLabel, string>;

/**
 * Exports StatsManager's metrics in Prometheus text format with vLLM V1's names, on its own registry
 * (never prom-client's global one). Counters and histograms are cumulative for the life of the
 * logger: StatsManager.reset() does not reset them (Prometheus expects monotonic counters).
 */
export class PrometheusStatLogger implements StatLogger {
    readonly registry = new Registry();
    private readonly metrics = new VllmMetrics(this.registry);
    private labels: Labels;
    private readonly fixedModelName: string | undefined;
    /** Finished requests seen before the length buckets were known; replayed once they are. */
    private pendingLengths: Array<{labels: Labels, request: FinishedRequestStats}> = [];
    /** Label sets whose series exist (prom-client's `zero` would wipe an existing histogram). */
    private readonly initialized: Labels[] = [];
    private server: MetricsHttpServer | undefined;

    private constructor(private readonly options: PrometheusStatLoggerOptions) {
        this.fixedModelName = options.modelName;
        this.labels = {model_name: options.modelName ?? "unknown", engine: String(options.engineIndex ?? 0)};
        if (options.maxModelLen !== undefined)
            this.metrics.createLengthHistograms(options.maxModelLen);
        if (options.modelName !== undefined)
            this.initializeSeries(this.labels);
    }

    /** Creates the logger and (unless `serve: false`) starts its HTTP endpoint; throws PrometheusPortInUseError. */
    static async start(options: PrometheusStatLoggerOptions = {}): Promise<PrometheusStatLogger> {
        const logger = new PrometheusStatLogger(options);
        if (options.serve ?? true)
            logger.server = await MetricsHttpServer.listen(options.host ?? "127.0.0.1", options.port ?? 0,
                async () => ({contentType: logger.registry.contentType, body: await logger.registry.metrics()}));
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

    /** The exposition text, as `/metrics` serves it. */
    async metricsText(): Promise<string> {
        return await this.registry.metrics();
    }

    record(update: StatUpdate): void {
        const m = this.metrics;
        const labels = this.labels;
        switch (update.type) {
            case "engine": {
                if (this.fixedModelName === undefined && update.info.model.name !== labels.model_name)
                    this.relabel(update.info.model.name);
                this.initializeSeries(this.labels);
                if (m.lengths === undefined) {
                    const lengths = m.createLengthHistograms(this.options.maxModelLen ?? update.maxModelLen);
                    for (const initialized of this.initialized)
                        for (const histogram of lengths)
                            histogram.zero(initialized);
                    for (const pending of this.pendingLengths)
                        this.observeLengths(pending.labels, pending.request);
                    this.pendingLengths = [];
                }
                return;
            }
            case "tokens":
                m.promptTokens.inc(labels, update.promptTokens);
                m.generationTokens.inc(labels, update.generationTokens);
                if (update.ttftS !== undefined)
                    m.ttft.observe(labels, update.ttftS);
                for (const itl of update.itlS)
                    m.itl.observe(labels, itl);
                return;
            case "preempted":
                m.preemptions.inc(labels);
                return;
            case "finished": {
                const request = update.request;
                m.requestSuccess.inc({...labels, finished_reason: request.reason});
                m.e2e.observe(labels, request.e2eS);
                if (request.queueS !== undefined) m.queue.observe(labels, request.queueS);
                if (request.prefillS !== undefined) m.prefill.observe(labels, request.prefillS);
                if (request.inferenceS !== undefined) m.inference.observe(labels, request.inferenceS);
                if (request.decodeS !== undefined) m.decode.observe(labels, request.decodeS);
                if (request.tpotS !== undefined) m.tpot.observe(labels, request.tpotS);
                if (m.lengths !== undefined)
                    this.observeLengths(labels, request);
                else if (this.pendingLengths.push({labels, request}) > maxPendingLengths)
                    this.pendingLengths.shift();
                return;
            }
            case "step":
                m.iterationTokens.observe(labels, update.stepTokens);
                return;
            case "gauges": {
                const g = update.gauges;
                m.running.set(labels, g.running);
                m.waiting.set(labels, g.waiting);
                m.kvCacheUsage.set(labels, g.kvCacheUsage);
                m.engineStall.set(labels, g.msSinceLastStep / 1000);
                m.vramUsed.set(labels, g.vramUsedBytes);
                m.vramTotal.set(labels, g.vramTotalBytes);
                for (const state of engineStates)
                    m.engineState.set({...labels, state}, state === g.state ? 1 : 0);
                return;
            }
            case "rejected":
                m.rejectedMessages.inc({...labels, source: update.source});
                return;
            case "reset":
                return;
        }
    }

    log(_now: number): void {}

    async dispose(): Promise<void> {
        const server = this.server;
        this.server = undefined;
        await server?.close();
    }

    private observeLengths(labels: Labels, request: FinishedRequestStats): void {
        const lengths = this.metrics.lengths!;
        lengths.prompt.observe(labels, request.promptTokens);
        lengths.generation.observe(labels, request.generationTokens);
        if (request.maxTokens > 0)
            lengths.maxTokens.observe(labels, request.maxTokens);
    }

    /** A new model name: gauges of the old one go (they would be stale); counters and histograms stay (they are true). */
    private relabel(modelName: string): void {
        const old = this.labels;
        const m = this.metrics;
        for (const gauge of [m.running, m.waiting, m.kvCacheUsage, m.engineStall, m.vramUsed, m.vramTotal])
            gauge.remove(old);
        for (const state of engineStates)
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
        for (const counter of [m.promptTokens, m.generationTokens, m.preemptions])
            counter.inc(labels, 0);
        for (const reason of finishReasons)
            m.requestSuccess.inc({...labels, finished_reason: reason}, 0);
        for (const gauge of [m.running, m.waiting, m.kvCacheUsage, m.engineStall, m.vramUsed, m.vramTotal])
            gauge.inc(labels, 0);
    }
}
