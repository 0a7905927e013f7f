/**
 * What TargetMonitor keeps per watched server (a source: its replicas' last readings, counters' high
 * marks and histogram history) and what any set of them adds up to: one engine step, one view, one
 * engine state. The same set of polled sources gives the merged view (all of them) and each server's
 * own view (that one alone), so every server is read once per poll whoever shows it.
 *
 * Counters are read as Prometheus's `increase()` reads them: what they grew by since the last poll;
 * one that went down means the server restarted, and then all of its new value is new. Values that
 * dip for a moment (llama.cpp's live slot progress, read in two requests) never count twice: each
 * counter only counts above its high-water mark. Never a negative rate. A replica's increase is taken
 * once per poll (`takeIncrease`) and then summed into as many steps as show it.
 */
import type {HistogramMetric} from "../../../protocol/statsView.js";
import type {EstimatedPercentiles, TargetKind, TargetReplicaView, TargetStatus, TargetView} from "../../../protocol/targetView.js";
import type {EngineClientState} from "../engineClient/engineObserver.js";
import {emptyIteration, type EngineStep} from "../engineClient/engineStep.js";
import {histogramIncrease, histogramQuantile, mergeHistograms, type BucketHistogram} from "./bucketHistogram.js";
import type {ModelIdLookup} from "./modelIdLookup.js";
import type {TargetReading} from "./targetReading.js";

export type WatchedTarget = {url: string, kind?: TargetKind | "auto", apiKey?: string};

type CounterField = "promptTokensTotal" | "generationTokensTotal" | "preemptionsTotal" | "prefixCacheQueriesTotal" | "prefixCacheHitsTotal" |
    "externalPrefixCacheQueriesTotal" | "externalPrefixCacheHitsTotal";

/** What a replica's counters grew by in one poll. */
export type CounterIncrease = {prompt: number, generation: number, preemptions: number, prefixQueries: number, prefixHits: number,
    externalQueries: number, externalHits: number};

export type Replica = {
    name: string,
    reading: TargetReading | undefined,
    counters: Map<CounterField, number>,
    /** What the counters grew by in the last poll (`takeIncrease`). */
    increase: CounterIncrease | undefined,
    /** Histogram scrapes in the window, oldest first (the first one is the window's base). */
    history: Array<{t: number, histograms: TargetReading["histograms"]}>
};

export type Source = {
    target: WatchedTarget,
    kind: TargetKind | undefined,
    model: string | undefined,
    /** Asks `/v1/models` for the model's name, not again and again of a server that has none. */
    modelLookup: ModelIdLookup,
    status: TargetStatus,
    since: number,
    error: string | null,
    replicas: Map<string, Replica>
};

const whatIsMissing: ReadonlyArray<[keyof TargetReading, string]> = [
    ["running", "requests running"], ["waiting", "requests waiting"], ["promptTokensTotal", "prompt tokens"],
    ["generationTokensTotal", "generation tokens"], ["kvCapacityTokens", "KV cache use"], ["prefixCacheQueriesTotal", "prefix cache hits"]
];
const histogramWords: ReadonlyArray<[HistogramMetric, string]> = [
    ["ttft", "time to first token"], ["itl", "inter-token latency"], ["tpot", "time per output token"], ["e2e", "end-to-end latency"],
    ["queue", "queue time"], ["prefill", "prefill time"], ["decode", "decode time"]
];

/** Sets `replica.increase` to what its counters grew by since the last call (restart-aware, high-water marked). */
export function takeIncrease(replica: Replica): void {
    const reading = replica.reading;
    replica.increase = undefined;
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
    replica.increase = {
        prompt: increase("promptTokensTotal"), generation: increase("generationTokensTotal"), preemptions: increase("preemptionsTotal"),
        prefixQueries: increase("prefixCacheQueriesTotal"), prefixHits: increase("prefixCacheHitsTotal"),
        externalQueries: increase("externalPrefixCacheQueriesTotal"), externalHits: increase("externalPrefixCacheHitsTotal")
    };
}

/** One step for these sources: their replicas' last increases summed, their gauges summed (up ones only). */
export function stepOf(sources: readonly Source[], now: number): EngineStep {
    const step: EngineStep = {iteration: emptyIteration(now)};
    const scheduler = {t: now, running: 0, waiting: 0, stepTokens: 0, kvUsedTokens: 0, kvCapacityTokens: 0};
    const iteration = step.iteration;
    for (const source of sources) {
        for (const replica of source.replicas.values()) {
            const reading = replica.reading;
            if (source.status === "up" && reading !== undefined) {
                scheduler.running += reading.running ?? 0;
                scheduler.waiting += reading.waiting ?? 0;
                scheduler.kvUsedTokens += reading.kvUsedTokens ?? 0;
                scheduler.kvCapacityTokens += reading.kvCapacityTokens ?? 0;
            }
            const increase = replica.increase;
            if (increase === undefined)
                continue;
            iteration.promptTokens += increase.prompt;
            iteration.generationTokens += increase.generation;
            iteration.preemptions += increase.preemptions;
            if (increase.prefixQueries > 0) {
                iteration.prefixCacheRequests += 1;
                iteration.prefixCacheQueries += increase.prefixQueries;
                iteration.prefixCacheHits += Math.min(increase.prefixHits, increase.prefixQueries);
            }
            if (increase.externalQueries > 0) {
                iteration.externalPrefixCacheRequests += 1;
                iteration.externalPrefixCacheQueries += increase.externalQueries;
                iteration.externalPrefixCacheHits += Math.min(increase.externalHits, increase.externalQueries);
            }
        }
    }
    scheduler.stepTokens = iteration.promptTokens + iteration.generationTokens;
    if (sources.some((source) => source.status === "up"))
        step.scheduler = scheduler;
    return step;
}

/** Ready while any is up; loading while all are still connecting; crashed otherwise. */
export function engineStateOf(sources: readonly Source[]): EngineClientState {
    return sources.some((s) => s.status === "up") ? "ready" : sources.every((s) => s.status === "connecting") ? "loading" : "crashed";
}

/** These servers as the panel shows them. */
export function viewOf(sources: readonly Source[]): TargetView {
    const replicas: TargetReplicaView[] = [];
    const up: TargetReading[] = [];
    const notes = new Set<string>();
    for (const source of sources) {
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
                vramUsedBytes: reading.vramUsedBytes ?? null,
                ...reading.slots !== undefined ? {slots: reading.slots} : {}
            });
        }
    }
    const notReported = up.length === 0 ? []
        : whatIsMissing.filter(([field]) => up.every((r) => r[field] === undefined)).map(([, words]) => words);
    const estimated = estimates(sources);
    if (up.length > 0) {
        for (const [metric, words] of histogramWords)
            if (estimated[metric] === undefined)
                notReported.push(words);
        notReported.push("per-request timeline");
    }
    return {replicas, notReported, estimated, notes: [...notes]};
}

/** Each histogram's increase over the window, per replica, merged bucket-wise, then PromQL's quantiles. */
function estimates(sources: readonly Source[]): Partial<Record<HistogramMetric, EstimatedPercentiles>> {
    const out: Partial<Record<HistogramMetric, EstimatedPercentiles>> = {};
    const byMetric = new Map<HistogramMetric, BucketHistogram[]>();
    for (const source of sources) {
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

function kvUsage(reading: TargetReading): number | null {
    const {kvUsedTokens: used, kvCapacityTokens: capacity} = reading;
    return used !== undefined && capacity !== undefined && capacity > 0 ? used / capacity : null;
}
