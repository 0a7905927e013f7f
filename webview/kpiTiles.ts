/**
 * The KPI tiles, named like vLLM's benchmark results and metrics. Each value element carries
 * `data-metric="<key>"` with the formatted number as its only text (and the exact value in
 * `data-value`); the unit sits in its own element next to it.
 */
import type {StatsSnapshotView} from "../protocol/statsView.js";
import {el, setText} from "./dom.js";
import {formatNumber} from "../common/format.js";

type KpiSource = Pick<StatsSnapshotView, "counters" | "gauges" | "percentiles">;

export type KpiDefinition = {
    key: string,
    label: string,
    unit: string,
    value(view: KpiSource): number | null
};

const ms = (seconds: number | null): number | null => seconds === null ? null : seconds * 1000;

export const kpiDefinitions: readonly KpiDefinition[] = [
    {key: "output_throughput", label: "Generation throughput", unit: "tok/s", value: (v) => v.gauges.generationTokensPerS},
    {key: "prompt_throughput", label: "Prompt throughput", unit: "tok/s", value: (v) => v.gauges.promptTokensPerS},
    {key: "request_throughput", label: "Request throughput", unit: "req/s", value: (v) => v.gauges.requestsPerS},
    {key: "median_ttft_ms", label: "TTFT p50", unit: "ms", value: (v) => ms(v.percentiles.ttft.p50)},
    {key: "p99_ttft_ms", label: "TTFT p99", unit: "ms", value: (v) => ms(v.percentiles.ttft.p99)},
    {key: "median_itl_ms", label: "ITL p50", unit: "ms", value: (v) => ms(v.percentiles.itl.p50)},
    {key: "p99_itl_ms", label: "ITL p99", unit: "ms", value: (v) => ms(v.percentiles.itl.p99)},
    {key: "median_tpot_ms", label: "TPOT p50", unit: "ms", value: (v) => ms(v.percentiles.tpot.p50)},
    {key: "median_e2el_ms", label: "E2E latency p50", unit: "ms", value: (v) => ms(v.percentiles.e2e.p50)},
    {key: "num_requests_running", label: "Running", unit: "reqs", value: (v) => v.gauges.running},
    {key: "num_requests_waiting", label: "Waiting", unit: "reqs", value: (v) => v.gauges.waiting},
    {key: "kv_cache_usage_perc", label: "KV cache", unit: "%", value: (v) => v.gauges.kvCacheUsage * 100},
    // vLLM's log-line hit rate (last 1000 requests' lookups); "–" until a request has been looked up.
    {key: "prefix_cache_hit_rate", label: "Prefix cache hit rate", unit: "%",
        value: (v) => v.counters.prefixCacheQueries === 0 ? null : v.gauges.prefixCacheHitRate * 100},
    {key: "completed", label: "Completed", unit: "reqs", value: (v) => v.counters.requests.completed},
    {key: "failed", label: "Failed", unit: "reqs", value: (v) => v.counters.requests.failed},
    {key: "num_preemptions", label: "Preemptions", unit: "", value: (v) => v.counters.preemptions}
];

export class KpiTiles {
    readonly element = el("section", "kpis");
    private readonly values: Array<{definition: KpiDefinition, element: HTMLElement}> = [];

    constructor() {
        this.element.setAttribute("aria-label", "Key metrics");
        for (const definition of kpiDefinitions) {
            const tile = el("div", "kpi");
            const value = el("span", "kpi-value", "–");
            value.dataset.metric = definition.key;
            const reading = el("div", "kpi-reading");
            reading.append(value, el("span", "kpi-unit", definition.unit));
            tile.append(el("div", "kpi-label", definition.label), reading);
            this.element.append(tile);
            this.values.push({definition, element: value});
        }
    }

    update(view: KpiSource): void {
        for (const {definition, element} of this.values) {
            const value = definition.value(view);
            setText(element, formatNumber(value));
            const exact = value === null ? "" : String(value);
            if (element.dataset.value !== exact)
                element.dataset.value = exact;
        }
    }
}
