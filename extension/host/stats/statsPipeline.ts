import type {EngineClient} from "../engineClient/engineClient.js";
import {LoggingStatLogger} from "./loggers/loggingStatLogger.js";
import {PrometheusStatLogger} from "./loggers/prometheusStatLogger.js";
import type {StatLogger} from "./loggers/statLogger.js";
import type {MetricsBody} from "./loggers/metricsHttpServer.js";
import {SwappableLogger} from "./loggers/swappableLogger.js";
import type {StatsSession} from "./statsSession.js";
import {StatsManager} from "./statsManager.js";

export type StatsPipelineOptions = {
    /** Default 1000 ms. */
    stallThresholdMs?: number,
    /** Seconds between vLLM log lines; 0 = no log line. Default 10. */
    logIntervalS?: number,
    /** `/metrics` on 127.0.0.1:port; 0 = off. Default 0. */
    prometheusPort?: number,
    /** Where the log line goes. */
    writeLogLine: (line: string) => void,
    onError?: (error: unknown) => void
};

export type LiveStatsSettings = {logIntervalS: number, prometheusPort: number, stallThresholdMs?: number};

/**
 * StatsManager plus its two loggers, fed by whichever EngineClient is attached. One pipeline outlives
 * engine restarts (so the ledger and counters do); the loggers follow settings live.
 */
export class StatsPipeline implements StatsSession {
    readonly manager: StatsManager;
    private readonly logLine = new SwappableLogger();
    private readonly prometheus = new SwappableLogger();
    /** The Prometheus logger rendered by another server (the API endpoint's `/metrics`). */
    private readonly mountedPrometheus = new SwappableLogger();
    private readonly detachers = new Map<EngineClient, () => void>();
    private applied: LiveStatsSettings = {logIntervalS: 0, prometheusPort: 0};
    /** Where both `/metrics` endpoints render: right after a step's delivery (quietMoments.ts). */
    private readonly quietMoment = async (): Promise<void> => await this.manager.quietMoment();

    constructor(private readonly options: StatsPipelineOptions) {
        this.manager = new StatsManager({
            loggers: [this.logLine, this.prometheus, this.mountedPrometheus],
            ...(options.stallThresholdMs !== undefined ? {stallThresholdMs: options.stallThresholdMs} : {}),
            ...(options.onError !== undefined ? {onError: options.onError} : {})
        });
    }

    /** Starts the loggers the options ask for; throws PortInUseError when the port is taken. */
    static async create(options: StatsPipelineOptions): Promise<StatsPipeline> {
        const pipeline = new StatsPipeline(options);
        await pipeline.applyLiveSettings({logIntervalS: options.logIntervalS ?? 10, prometheusPort: options.prometheusPort ?? 0});
        return pipeline;
    }

    /** The Prometheus endpoint, when one is serving. */
    get metricsUrl(): string | undefined {
        return (this.prometheus.logger as PrometheusStatLogger | undefined)?.url;
    }

    /**
     * A Prometheus logger without its own port, for a server that serves `/metrics` itself (the
     * OpenAI-compatible endpoint, the `watch` dashboard); returns what renders the exposition. Created
     * once; `modelName` fixes the `model_name` label (watched servers have no engine to name it).
     */
    async mountMetrics(options: {modelName?: string} = {}): Promise<() => Promise<MetricsBody>> {
        let logger = this.mountedPrometheus.logger as PrometheusStatLogger | undefined;
        if (logger === undefined) {
            logger = this.primed(await PrometheusStatLogger.start({serve: false, beforeRender: this.quietMoment, ...options}));
            await this.mountedPrometheus.replace(logger);
        }
        const mounted = logger;
        return async () => await mounted.render();
    }

    attach(client: EngineClient): void {
        if (!this.detachers.has(client))
            this.detachers.set(client, this.observe(client));
    }

    /** Follows a client; a client that is already running first tells the manager its info and state. */
    private observe(client: EngineClient): () => void {
        const info = client.info;
        if (info !== undefined && client.state === "ready")
            this.manager.onEngineReady(info);
        this.manager.onEngineState(client.state);
        return client.observe(this.manager);
    }

    detach(client: EngineClient): void {
        this.detachers.get(client)?.();
        this.detachers.delete(client);
    }

    /** Re-creates a logger only when its setting changed. */
    async applyLiveSettings(settings: LiveStatsSettings): Promise<void> {
        if (settings.stallThresholdMs !== undefined)
            this.manager.setStallThresholdMs(settings.stallThresholdMs);
        if (settings.logIntervalS !== this.applied.logIntervalS) {
            await this.logLine.replace(settings.logIntervalS > 0
                ? this.primed(new LoggingStatLogger({write: this.options.writeLogLine, logIntervalS: settings.logIntervalS}))
                : undefined);
            this.applied.logIntervalS = settings.logIntervalS;
        }
        if (settings.prometheusPort !== this.applied.prometheusPort) {
            await this.prometheus.replace(undefined);
            this.applied.prometheusPort = 0;
            if (settings.prometheusPort > 0) {
                const logger = await PrometheusStatLogger.start({port: settings.prometheusPort, beforeRender: this.quietMoment});
                await this.prometheus.replace(this.primed(logger));
                this.applied.prometheusPort = settings.prometheusPort;
            }
        }
    }

    /** A logger added after the engine is ready must learn the engine info (model name, backend, buckets). */
    private primed<T extends StatLogger>(logger: T): T {
        this.manager.primeLogger(logger);
        return logger;
    }

    totals(): {promptTokens: number, generationTokens: number, finished: number} {
        const totals = this.manager.benchTotals();
        return {
            promptTokens: totals.finishedPromptTokens,
            generationTokens: totals.finishedGenerationTokens,
            finished: totals.requests.completed + totals.requests.failed + totals.requests.aborted
        };
    }

    async dispose(): Promise<void> {
        for (const detach of this.detachers.values())
            detach();
        this.detachers.clear();
        await this.manager.dispose();
    }
}
