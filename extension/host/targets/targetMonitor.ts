/**
 * Watches servers — llama.cpp's, vLLM (several replicas or data-parallel ranks), Ollama — by polling
 * them, and feeds one StatsManager as if they were one engine: the counters' increases as a step's
 * tokens (summed over replicas, so merged counters are exact), the gauges summed, the servers' own
 * histograms as bucket estimates, and each replica's state in the view's `target`.
 *
 * Counters are read as Prometheus's `increase()` reads them: what they grew by since the last poll;
 * one that went down means the server restarted, and then all of its new value is new. Values that
 * dip for a moment (llama.cpp's live slot progress, read in two requests) never count twice: each
 * counter only counts above its high-water mark. Never a negative rate.
 */
import {errorMessage} from "../../../common/errorMessage.js";
import type {HistogramMetric} from "../../../protocol/statsView.js";
import type {EstimatedPercentiles, TargetKind, TargetReplicaView, TargetStatus, TargetView} from "../../../protocol/targetView.js";
import type {EngineClientState} from "../engineClient/engineObserver.js";
import {emptyIteration, type EngineStep} from "../engineClient/engineStep.js";
import {histogramIncrease, histogramQuantile, mergeHistograms, type BucketHistogram} from "./bucketHistogram.js";
import {readLlamaCpp} from "./llamaCppReader.js";
import {readOllama} from "./ollamaReader.js";
import {probeTarget} from "./probeTarget.js";
import {TargetReadError, type TargetGetOptions} from "./targetHttp.js";
import type {TargetReading} from "./targetReading.js";
import {readVllm} from "./vllmReader.js";

export type WatchedTarget = {url: string, kind?: TargetKind | "auto", apiKey?: string};

/** What the monitor feeds: StatsManager fits. */
export interface TargetSink {
    onEngineState(state: EngineClientState): void,
    onOutputs(step: EngineStep): void,
    onTarget(view: TargetView | null): void
}

export type TargetMonitorOptions = {
    targets: readonly WatchedTarget[],
    sink: TargetSink,
    /** Poll every this many ms. Default 1000. */
    intervalMs?: number,
    /** Histogram estimates cover this much time. Default 60 s (StatsManager's percentile window). */
    percentileWindowMs?: number,
    /** Per request to a server. Default 2000 ms. */
    timeoutMs?: number,
    now?: () => number
};

type CounterField = "promptTokensTotal" | "generationTokensTotal" | "preemptionsTotal" | "prefixCacheQueriesTotal" | "prefixCacheHitsTotal";

const whatIsMissing: ReadonlyArray<[keyof TargetReading, string]> = [
    ["running", "requests running"], ["waiting", "requests waiting"], ["promptTokensTotal", "prompt tokens"],
    ["generationTokensTotal", "generation tokens"], ["kvCapacityTokens", "KV cache use"], ["prefixCacheQueriesTotal", "prefix cache hits"]
];
const histogramWords: ReadonlyArray<[HistogramMetric, string]> = [
    ["ttft", "time to first token"], ["itl", "inter-token latency"], ["tpot", "time per output token"], ["e2e", "end-to-end latency"],
    ["queue", "queue time"], ["prefill", "prefill time"], ["decode", "decode time"]
];

type NamedReading = {name: string, reading: TargetReading};

type Replica = {
    name: string,
    reading: TargetReading | undefined,
    counters: Map<CounterField, number>,
    /** Histogram scrapes in the window, oldest first (the first one is the window's base). */
    history: Array<{t: number, histograms: TargetReading["histograms"]}>
};

type Source = {
    target: WatchedTarget,
    kind: TargetKind | undefined,
    model: string | undefined,
    status: TargetStatus,
    since: number,
    error: string | null,
    replicas: Map<string, Replica>
};

export class TargetMonitor {
    private readonly sources: Source[];
    private readonly now: () => number;
    private readonly intervalMs: number;
    private readonly windowMs: number;
    private timer: NodeJS.Timeout | undefined;
    private polling: Promise<void> | undefined;
    private engineState: EngineClientState | undefined;
    private stopped = false;

    constructor(private readonly options: TargetMonitorOptions) {
        if (options.targets.length === 0)
            throw new RangeError("watch at least one server");
        this.now = options.now ?? Date.now;
        this.intervalMs = options.intervalMs ?? 1000;
        this.windowMs = options.percentileWindowMs ?? 60_000;
        const now = this.now();
        this.sources = options.targets.map((target) => ({
            target: {...target, url: target.url.replace(/\/+$/, "")},
            kind: target.kind === undefined || target.kind === "auto" ? undefined : target.kind,
            model: undefined, status: "connecting", since: now, error: null, replicas: new Map()
        }));
        this.setEngineState("loading");
        options.sink.onTarget(this.view());
    }

    /** Polls now and then every `intervalMs` until `stop()`. */
    start(): void {
        const loop = () => {
            if (this.stopped)
                return;
            this.polling = this.pollOnce().finally(() => {
                if (!this.stopped)
                    this.timer = setTimeout(loop, this.intervalMs);
            });
        };
        loop();
    }

    async stop(): Promise<void> {
        this.stopped = true;
        clearTimeout(this.timer);
        await this.polling;
    }

    /** One round: every server read at once, then one step into the sink. Never throws. */
    async pollOnce(): Promise<void> {
        await Promise.all(this.sources.map(async (source) => await this.read(source)));
        const now = this.now();
        const step: EngineStep = {iteration: emptyIteration(now)};
        const scheduler = {t: now, running: 0, waiting: 0, stepTokens: 0, kvUsedTokens: 0, kvCapacityTokens: 0};
        for (const source of this.sources) {
            if (source.status !== "up")
                continue;
            for (const replica of source.replicas.values()) {
                const reading = replica.reading;
                if (reading === undefined)
                    continue;
                scheduler.running += reading.running ?? 0;
                scheduler.waiting += reading.waiting ?? 0;
                scheduler.kvUsedTokens += reading.kvUsedTokens ?? 0;
                scheduler.kvCapacityTokens += reading.kvCapacityTokens ?? 0;
            }
        }
        for (const source of this.sources)
            for (const replica of source.replicas.values())
                this.addIncreases(replica, step);
        scheduler.stepTokens = step.iteration.promptTokens + step.iteration.generationTokens;
        if (this.sources.some((source) => source.status === "up"))
            step.scheduler = scheduler;
        this.setEngineState(this.sources.some((s) => s.status === "up") ? "ready"
            : this.sources.every((s) => s.status === "connecting") ? "loading" : "crashed");
        this.options.sink.onOutputs(step);
        this.options.sink.onTarget(this.view());
    }

    private async read(source: Source): Promise<void> {
        const now = () => this.now();
        const http: TargetGetOptions = {
            ...(source.target.apiKey !== undefined ? {apiKey: source.target.apiKey} : {}),
            ...(this.options.timeoutMs !== undefined ? {timeoutMs: this.options.timeoutMs} : {})
        };
        try {
            source.kind ??= await probeTarget(source.target.url, http);
            const readings = await this.readKind(source, source.kind, http);
            const t = now();
            for (const {name, reading} of readings) {
                let replica = source.replicas.get(name);
                if (replica === undefined)
                    source.replicas.set(name, replica = {name, reading: undefined, counters: new Map(), history: []});
                replica.reading = reading;
                replica.history.push({t, histograms: reading.histograms});
                while (replica.history.length > 1 && replica.history[1]!.t <= t - this.windowMs)
                    replica.history.shift();
            }
            source.model = readings[0]?.reading.model ?? source.model;
            this.setStatus(source, "up", null);
        } catch (error) {
            const kind = error instanceof TargetReadError ? error.kind : "bad";
            this.setStatus(source, kind === "unreachable" ? "unreachable" : kind === "auth" ? "unauthorized" : "error", errorMessage(error));
            for (const replica of source.replicas.values())
                replica.reading = undefined;
        }
    }

    private async readKind(source: Source, kind: TargetKind, http: TargetGetOptions): Promise<NamedReading[]> {
        const url = source.target.url;
        switch (kind) {
            case "llamacpp": return [{name: url, reading: await readLlamaCpp(url, http, source.model)}];
            case "ollama": return [{name: url, reading: await readOllama(url, http)}];
            case "vllm": {
                const ranks = await readVllm(url, http);
                return ranks.map(({engine, reading}) => ({name: ranks.length > 1 ? `${url}#${engine}` : url, reading}));
            }
            case "openai":
                throw new TargetReadError(`${url} only speaks the OpenAI API, which has nothing to poll: ` +
                    "watch its traffic with `inference-monitor proxy --upstream` instead", "bad");
        }
    }

    private setStatus(source: Source, status: TargetStatus, error: string | null): void {
        if (source.status !== status)
            source.since = this.now();
        source.status = status;
        source.error = error;
    }

    /** Adds what the replica's counters grew by since the last poll to the step (restart-aware, high-water marked). */
    private addIncreases(replica: Replica, step: EngineStep): void {
        const reading = replica.reading;
        if (reading === undefined)
            return;
        const lastPrompt = replica.counters.get("promptTokensTotal");
        const restarted = lastPrompt !== undefined && reading.promptTokensTotal !== undefined && reading.promptTokensTotal < lastPrompt;
        const increase = (field: CounterField): number => {
            const value = reading[field];
            if (value === undefined)
                return 0;
            const high = replica.counters.get(field);
            if (high === undefined || restarted) {
                replica.counters.set(field, value);
                return high === undefined ? 0 : value; // the first reading is the baseline
            }
            replica.counters.set(field, Math.max(high, value));
            return Math.max(0, value - high);
        };
        const iteration = step.iteration;
        iteration.promptTokens += increase("promptTokensTotal");
        iteration.generationTokens += increase("generationTokensTotal");
        iteration.preemptions += increase("preemptionsTotal");
        const queries = increase("prefixCacheQueriesTotal");
        const hits = increase("prefixCacheHitsTotal");
        if (queries > 0) {
            iteration.prefixCacheRequests += 1;
            iteration.prefixCacheQueries += queries;
            iteration.prefixCacheHits += Math.min(hits, queries);
        }
    }

    /** The watched servers as the panel shows them. */
    view(): TargetView {
        const replicas: TargetReplicaView[] = [];
        const up: TargetReading[] = [];
        const notes = new Set<string>();
        for (const source of this.sources) {
            const readings = source.status === "up" ? [...source.replicas.values()].filter((r) => r.reading !== undefined) : [];
            const base = {url: source.target.url, version: null, status: source.status, since: source.since, error: source.error};
            if (readings.length === 0) {
                // Not identified yet (never answered): shown as vLLM-like, the kind with the most to report.
                replicas.push({...base, kind: source.kind ?? "vllm", name: source.target.url, model: source.model ?? null,
                    running: null, waiting: null, kvCacheUsage: null, vramUsedBytes: null});
                continue;
            }
            for (const replica of readings) {
                const reading = replica.reading!;
                up.push(reading);
                reading.notes.forEach((note) => notes.add(note));
                replicas.push({
                    ...base, name: replica.name, kind: reading.kind, model: reading.model ?? null, version: reading.version ?? null,
                    running: reading.running ?? null, waiting: reading.waiting ?? null,
                    kvCacheUsage: kvUsage(reading),
                    vramUsedBytes: reading.vramUsedBytes ?? null
                });
            }
        }
        const notReported = up.length === 0 ? []
            : whatIsMissing.filter(([field]) => up.every((r) => r[field] === undefined)).map(([, words]) => words);
        const estimated = this.estimates();
        if (up.length > 0) {
            for (const [metric, words] of histogramWords)
                if (estimated[metric] === undefined)
                    notReported.push(words);
            notReported.push("per-request timeline");
        }
        return {replicas, notReported, estimated, notes: [...notes]};
    }

    /** Each histogram's increase over the window, per replica, merged bucket-wise, then PromQL's quantiles. */
    private estimates(): Partial<Record<HistogramMetric, EstimatedPercentiles>> {
        const out: Partial<Record<HistogramMetric, EstimatedPercentiles>> = {};
        const byMetric = new Map<HistogramMetric, BucketHistogram[]>();
        for (const source of this.sources) {
            if (source.status !== "up")
                continue;
            for (const replica of source.replicas.values()) {
                const latest = replica.history.at(-1);
                const base = replica.history.length > 1 ? replica.history[0] : undefined;
                if (latest === undefined || replica.reading === undefined)
                    continue;
                const histograms = Object.entries(latest.histograms) as Array<[HistogramMetric, BucketHistogram]>;
                for (const [metric, histogram] of histograms) {
                    const list = byMetric.get(metric) ?? [];
                    list.push(histogramIncrease(histogram, base?.histograms[metric]));
                    byMetric.set(metric, list);
                }
            }
        }
        for (const [metric, list] of byMetric) {
            let merged: BucketHistogram | undefined;
            try {
                merged = mergeHistograms(list);
            } catch {
                continue; // replicas with different buckets: no honest merge
            }
            if (merged === undefined)
                continue;
            out[metric] = {
                count: merged.count,
                mean: merged.count > 0 ? merged.sum / merged.count : null,
                p50: histogramQuantile(0.5, merged),
                p90: histogramQuantile(0.9, merged),
                p99: histogramQuantile(0.99, merged)
            };
        }
        return out;
    }

    private setEngineState(state: EngineClientState): void {
        if (state === this.engineState)
            return;
        this.engineState = state;
        this.options.sink.onEngineState(state);
    }
}

function kvUsage(reading: TargetReading): number | null {
    const {kvUsedTokens: used, kvCapacityTokens: capacity} = reading;
    return used !== undefined && capacity !== undefined && capacity > 0 ? used / capacity : null;
}
