/**
 * Stats exports, for "Export Stats…", the panel's Export buttons and the dashboard's downloads:
 * - JSON: the whole StatsSnapshotView (counters, gauges, percentiles, histograms, time series, every
 *   recent request's lifecycle, and the per-client table);
 * - CSV: the time series, one row per sample;
 * - requests CSV (dashboard `/export-requests.csv`): one row per recent request, metrics in ms.
 */
import type {StatsSnapshotView, TimeSeriesPoint} from "../../../protocol/statsView.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";

export type StatsExportFormat = "json" | "csv";

export type StatsExport = {fileName: string, mimeType: string, content: string};

const csvColumns: ReadonlyArray<[string, (record: RequestLifecycle) => string | number | undefined]> = [
    ["id", (r) => r.id],
    ["client", (r) => r.client],
    ["phase", (r) => r.phase],
    ["finished_reason", (r) => r.reason],
    ["priority", (r) => r.priority],
    ["max_tokens", (r) => r.maxTokens],
    ["prompt_tokens", (r) => r.promptTokens],
    ["cached_tokens", (r) => r.cachedTokens],
    ["restored_tokens", (r) => r.restoredTokens],
    ["generated_tokens", (r) => r.generatedTokens],
    ["sequence", (r) => r.sequence],
    ["preemptions", (r) => r.preemptions.length],
    ["arrival", (r) => new Date(r.arrival).toISOString()],
    ["ttft_ms", (r) => ms(r.metrics.ttftS)],
    ["tpot_ms", (r) => ms(r.metrics.tpotS)],
    ["e2el_ms", (r) => ms(r.metrics.e2eS)],
    ["queue_ms", (r) => ms(r.metrics.queueS)],
    ["prefill_ms", (r) => ms(r.metrics.prefillS)],
    ["decode_ms", (r) => ms(r.metrics.decodeS)],
    ["inference_ms", (r) => ms(r.metrics.inferenceS)],
    ["error", (r) => r.error]
];

function ms(seconds: number | undefined): string | undefined {
    return seconds === undefined ? undefined : (seconds * 1000).toFixed(3);
}

/** One CSV cell (RFC 4180 quoting; text that a spreadsheet would run as a formula is prefixed with '). */
function csvCell(value: string | number | undefined): string {
    if (value === undefined)
        return "";
    let text = String(value);
    if (typeof value === "string" && /^[=+\-@\t\r]/.test(text))
        text = `'${text}`;
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function requestsCsv(requests: readonly RequestLifecycle[]): string {
    const lines = [csvColumns.map(([name]) => name).join(",")];
    for (const record of requests)
        lines.push(csvColumns.map(([, value]) => csvCell(value(record))).join(","));
    return `${lines.join("\r\n")}\r\n`;
}

const seriesColumns: ReadonlyArray<[string, (point: TimeSeriesPoint) => string | number | null]> = [
    ["time", (p) => new Date(p.t).toISOString()],
    ["prompt_tokens_per_s", (p) => p.promptTokensPerS],
    ["generation_tokens_per_s", (p) => p.generationTokensPerS],
    ["requests_per_s", (p) => p.requestsPerS],
    ["ttft_p50_ms", (p) => msOrNull(p.ttftP50S)],
    ["ttft_p99_ms", (p) => msOrNull(p.ttftP99S)],
    ["itl_p50_ms", (p) => msOrNull(p.itlP50S)],
    ["itl_p99_ms", (p) => msOrNull(p.itlP99S)],
    ["running", (p) => p.running],
    ["waiting", (p) => p.waiting],
    ["kv_cache_usage_perc", (p) => (p.kvCacheUsage * 100).toFixed(2)],
    ["vram_used_bytes", (p) => p.vramUsedBytes]
];

function msOrNull(seconds: number | null): string | null {
    return seconds === null ? null : (seconds * 1000).toFixed(3);
}

/** The time series as CSV; empty cells where a sample had no value. */
export function timeSeriesCsv(points: readonly TimeSeriesPoint[]): string {
    const lines = [seriesColumns.map(([name]) => name).join(",")];
    for (const point of points)
        lines.push(seriesColumns.map(([, value]) => value(point) ?? "").join(","));
    return `${lines.join("\r\n")}\r\n`;
}

function stamp(date: Date): string {
    return date.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
}

export function exportStats(snapshot: StatsSnapshotView, format: StatsExportFormat, now = new Date()): StatsExport {
    const base = `inference-monitor-${stamp(now)}`;
    if (format === "json")
        return {fileName: `${base}.json`, mimeType: "application/json", content: `${JSON.stringify(snapshot, null, 2)}\n`};
    return {fileName: `${base}-timeseries.csv`, mimeType: "text/csv", content: timeSeriesCsv(snapshot.timeSeries)};
}
