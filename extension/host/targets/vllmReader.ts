/**
 * vLLM (V1 metric names) and anything that exports them — our own `serve` does: one scrape of
 * `/metrics` gives one reading per data-parallel rank (the `engine` label). Counters and gauges are
 * read as they are; the latency and length histograms are kept whole for bucket estimates.
 */
import {finishReasons, type FinishReason} from "../../../protocol/engineMessages.js";
import type {HistogramMetric} from "../../../protocol/statsView.js";
import {vllmMetricNames as names} from "../stats/loggers/prometheusMetrics.js";
import {matches, parseMetricsAnswer, sumSamples, type Exposition, type Labels} from "./prometheusText.js";
import {targetGet, TargetReadError, type TargetGetOptions} from "./targetHttp.js";
import type {TargetReading} from "./targetReading.js";

/** Our metric → vLLM's histogram family, newest name first (vLLM < 0.11 called the ITL `time_per_output_token`). */
const histogramFamilies: Record<HistogramMetric, readonly string[]> = {
    ttft: [names.ttft],
    itl: [names.itl, "vllm:time_per_output_token_seconds"],
    tpot: [names.tpot],
    e2e: [names.e2e],
    queue: [names.queue],
    prefill: [names.prefill],
    decode: [names.decode],
    inference: [names.inference],
    promptTokens: [names.promptTokensRequest],
    generationTokens: [names.generationTokensRequest]
};

export type VllmRankReading = {engine: string, reading: TargetReading};

export async function readVllm(baseUrl: string, http: TargetGetOptions): Promise<VllmRankReading[]> {
    const response = await targetGet(`${baseUrl}/metrics`, http);
    if (response.status !== 200)
        throw new TargetReadError(`/metrics answered HTTP ${response.status}`, "bad");
    return vllmReadings(parseMetricsAnswer(`${baseUrl}/metrics`, response.text));
}

/** One reading per `engine` label value found on `vllm:num_requests_running`. */
export function vllmReadings(exposition: Exposition): VllmRankReading[] {
    const running = exposition.samples.get(names.running);
    if (running === undefined || running.length === 0)
        throw new TargetReadError(`/metrics has no ${names.running}; not a vLLM server?`, "bad");
    const engines = [...new Set(running.map((sample) => sample.labels.engine ?? ""))];
    return engines.map((engine) => ({engine, reading: rankReading(exposition, engine === "" ? {} : {engine})}));
}

function rankReading(exposition: Exposition, rank: Labels): TargetReading {
    const value = (name: string) => sumSamples(exposition, name, rank);
    const model = exposition.samples.get(names.running)?.find((sample) => matches(sample.labels, rank))?.labels.model_name;
    const reading: TargetReading = {
        kind: "vllm", model,
        running: value(names.running),
        waiting: value(names.waiting),
        promptTokensTotal: value(names.promptTokens),
        generationTokensTotal: value(names.generationTokens),
        preemptionsTotal: value(names.preemptions),
        prefixCacheQueriesTotal: value(names.prefixCacheQueries),
        prefixCacheHitsTotal: value(names.prefixCacheHits),
        externalPrefixCacheQueriesTotal: value(names.externalPrefixCacheQueries),
        externalPrefixCacheHitsTotal: value(names.externalPrefixCacheHits),
        histograms: {},
        notes: []
    };
    const finished: Partial<Record<FinishReason, number>> = {};
    for (const sample of exposition.samples.get(names.requestSuccess) ?? []) {
        const reason = sample.labels.finished_reason;
        if (matches(sample.labels, rank) && reason !== undefined && (finishReasons as readonly string[]).includes(reason))
            finished[reason as FinishReason] = (finished[reason as FinishReason] ?? 0) + sample.value;
    }
    if (Object.keys(finished).length > 0)
        reading.finishedTotal = finished;
    const usage = value(names.kvCacheUsage) ?? value("vllm:gpu_cache_usage_perc");
    const capacity = kvCapacityTokens(exposition, rank);
    if (usage !== undefined && capacity !== undefined) {
        reading.kvCapacityTokens = capacity;
        reading.kvUsedTokens = Math.round(usage * capacity);
    } else if (usage !== undefined)
        reading.notes.push("KV cache size not exported (no vllm:cache_config_info): KV use shown as a fraction only");
    reading.vramUsedBytes = value(names.vramUsed);
    reading.vramTotalBytes = value(names.vramTotal);
    for (const [metric, families] of Object.entries(histogramFamilies) as Array<[HistogramMetric, readonly string[]]>) {
        for (const family of families) {
            const series = exposition.histograms.get(family)?.filter((histogram) => matches(histogram.labels, rank));
            if (series !== undefined && series.length > 0) {
                reading.histograms[metric] = series[0];
                break;
            }
        }
    }
    return reading;
}

/** `vllm:cache_config_info{block_size, num_gpu_blocks}`: the KV cache's size in tokens. */
function kvCapacityTokens(exposition: Exposition, rank: Labels): number | undefined {
    const info = exposition.samples.get("vllm:cache_config_info") ?? [];
    const sample = info.find((s) => matches(s.labels, rank)) ?? info.find((s) => s.labels.engine === undefined);
    const blocks = Number(sample?.labels.num_gpu_blocks);
    const blockSize = Number(sample?.labels.block_size);
    return Number.isFinite(blocks) && Number.isFinite(blockSize) && blocks > 0 && blockSize > 0 ? blocks * blockSize : undefined;
}
