/**
 * The KPI tiles, named like vLLM's benchmark results and metrics. Each value element carries
 * `data-metric="<key>"` with the formatted number as its only text (and the exact value in
 * `data-value`); the unit sits in its own element next to it.
 *
 * For watched servers (`target` in the view) a tile shows what those servers give: "not reported" when
 * none of them reports the number, and for latencies the estimate from their histogram buckets,
 * marked "≈" (`data-estimated`), since the exact per-request values never reach us — unless the
 * requests pass our monitoring proxy, which measures them exactly.
 *
 * The rate tiles answer "how fast was it?" when nothing runs: with no request in flight, instead of the
 * windowed rate (which falls to 0 once the work is done) they show the average over the last active
 * period (`lastActive` in the view, kept by the host), dimmed (`data-last-active`), with a note under
 * the number (`data-note="<key>"`): "last active 10 s ago".
 */
import type {ActivePeriodView, LatencyMetric, StatsSnapshotView} from "../protocol/statsView.js";
import type {TargetView} from "../protocol/targetView.js";
import {el, setText} from "./dom.js";
import {formatClock, formatDuration, formatNumber} from "../common/format.js";

type KpiSource = Pick<StatsSnapshotView, "counters" | "gauges" | "percentiles" | "target" | "lastActive">;

export type KpiDefinition = {
    key: string,
    label: string,
    unit: string,
    value(view: KpiSource): number | null,
    /** For watched servers: the words of TargetView.notReported that make this tile "not reported". */
    reportedAs?: string,
    /** For watched servers: the bucket estimate this tile shows instead (latencies); undefined when there is none. */
    estimate?: (target: TargetView) => number | null | undefined,
    /** For rates: what the tile shows while nothing is in flight, from the last active period. */
    lastActive?: (period: ActivePeriodView) => number
};

/** A latency tile: exact from our own requests, ≈ from the servers' buckets when watching. */
function latency(key: string, label: string, metric: LatencyMetric, quantile: "p50" | "p99", words: string): KpiDefinition {
    return {key, label, unit: "ms", value: (v) => ms(v.percentiles[metric][quantile]), reportedAs: words,
        estimate: (target) => {
            const estimated = target.estimated[metric];
            return estimated === undefined ? undefined : ms(estimated[quantile]);
        }};
}

const ms = (seconds: number | null): number | null => seconds === null ? null : seconds * 1000;

export const kpiDefinitions: readonly KpiDefinition[] = [
    {key: "output_throughput", label: "Generation throughput", unit: "tok/s", value: (v) => v.gauges.generationTokensPerS,
        reportedAs: "generation tokens", lastActive: (period) => period.generationTokensPerS},
    {key: "prompt_throughput", label: "Prompt throughput", unit: "tok/s", value: (v) => v.gauges.promptTokensPerS, reportedAs: "prompt tokens",
        lastActive: (period) => period.promptTokensPerS},
    {key: "request_throughput", label: "Request throughput", unit: "req/s", value: (v) => v.gauges.requestsPerS,
        reportedAs: "per-request timeline", lastActive: (period) => period.requestsPerS},
    latency("median_ttft_ms", "TTFT p50", "ttft", "p50", "time to first token"),
    latency("p99_ttft_ms", "TTFT p99", "ttft", "p99", "time to first token"),
    latency("median_itl_ms", "ITL p50", "itl", "p50", "inter-token latency"),
    latency("p99_itl_ms", "ITL p99", "itl", "p99", "inter-token latency"),
    latency("median_tpot_ms", "TPOT p50", "tpot", "p50", "time per output token"),
    latency("median_e2el_ms", "E2E latency p50", "e2e", "p50", "end-to-end latency"),
    {key: "num_requests_running", label: "Running", unit: "reqs", value: (v) => v.gauges.running, reportedAs: "requests running"},
    {key: "num_requests_waiting", label: "Waiting", unit: "reqs", value: (v) => v.gauges.waiting, reportedAs: "requests waiting"},
    {key: "kv_cache_usage_perc", label: "KV cache", unit: "%", value: (v) => v.gauges.kvCacheUsage * 100, reportedAs: "KV cache use"},
    // vLLM's log-line hit rate (last 1000 requests' lookups); "–" until a request has been looked up.
    {key: "prefix_cache_hit_rate", label: "Prefix cache hit rate", unit: "%",
        value: (v) => v.counters.prefixCacheQueries === 0 ? null : v.gauges.prefixCacheHitRate * 100, reportedAs: "prefix cache hits"},
    // The prompt cache's (saved sequence states; vLLM's external prefix cache): "–" while none was looked up (none, or off).
    {key: "external_prefix_cache_hit_rate", label: "Prompt cache hit rate", unit: "%",
        value: (v) => v.counters.externalPrefixCacheQueries === 0 ? null : v.gauges.externalPrefixCacheHitRate * 100},
    {key: "completed", label: "Completed", unit: "reqs", value: (v) => v.counters.requests.completed, reportedAs: "per-request timeline"},
    {key: "failed", label: "Failed", unit: "reqs", value: (v) => v.counters.requests.failed, reportedAs: "per-request timeline"},
    {key: "num_preemptions", label: "Preemptions", unit: "", value: (v) => v.counters.preemptions}
];

/** The last active period, when the view is idle (nothing in flight) and has one. */
export function idlePeriod(view: Pick<KpiSource, "counters" | "lastActive">): ActivePeriodView | undefined {
    return view.counters.requests.inFlight === 0 && view.lastActive !== null ? view.lastActive : undefined;
}

/** "last active 10 s ago": how long ago the period ended, whole seconds under a minute. */
export function lastActiveNote(period: ActivePeriodView, hostNow: number): string {
    const agoMs = Math.max(0, hostNow - period.endedAt);
    return `last active ${agoMs < 60_000 ? `${Math.floor(agoMs / 1000)} s` : formatDuration(agoMs)} ago`;
}

export class KpiTiles {
    readonly element = el("section", "kpis");
    private readonly values: Array<{definition: KpiDefinition, element: HTMLElement, unit: HTMLElement, note: HTMLElement}> = [];

    constructor() {
        this.element.setAttribute("aria-label", "Key metrics");
        for (const definition of kpiDefinitions) {
            const tile = el("div", "kpi");
            const value = el("span", "kpi-value", "–");
            value.dataset.metric = definition.key;
            const reading = el("div", "kpi-reading");
            const unit = el("span", "kpi-unit", definition.unit);
            reading.append(value, unit);
            const note = el("div", "kpi-note");
            note.dataset.note = definition.key;
            note.hidden = true;
            tile.append(el("div", "kpi-label", definition.label), reading, note);
            this.element.append(tile);
            this.values.push({definition, element: value, unit, note});
        }
    }

    /** `hostNow`: the host clock now, for how long ago the last active period ended. */
    update(view: KpiSource, hostNow: number): void {
        const target = view.target;
        const idle = idlePeriod(view);
        for (const {definition, element, unit, note} of this.values) {
            const words = definition.reportedAs;
            const notReported = target !== null && words !== undefined && target.notReported.includes(words);
            const estimate = target === null || notReported ? undefined : definition.estimate?.(target);
            const estimated = estimate !== undefined;
            const lastActive = notReported || estimated || idle === undefined ? undefined : definition.lastActive?.(idle);
            const value = notReported ? null
                : estimated ? estimate
                    : lastActive !== undefined ? lastActive : definition.value(view);
            setText(element, notReported ? "not reported" : `${estimated && value !== null ? "≈ " : ""}${formatNumber(value)}`);
            const exact = value === null ? "" : String(value);
            if (element.dataset.value !== exact)
                element.dataset.value = exact;
            setFlag(element, "notReported", notReported);
            if (unit.hidden !== notReported)
                unit.hidden = notReported;
            setFlag(element, "estimated", estimated);
            setFlag(element, "lastActive", lastActive !== undefined);
            setText(note, lastActive !== undefined && idle !== undefined ? lastActiveNote(idle, hostNow) : "");
            if (note.hidden !== (lastActive === undefined))
                note.hidden = lastActive === undefined;
            element.title = notReported ? "The watched server does not report this"
                : estimated ? "≈ from the servers' histogram buckets (linear inside the bucket, as PromQL's histogram_quantile)"
                    : lastActive !== undefined && idle !== undefined ? lastActiveTitle(idle) : "";
        }
    }
}

/** What the dimmed number is: the period it averages over. */
function lastActiveTitle(period: ActivePeriodView): string {
    return `Nothing is running: the average over the last active period, ${formatClock(period.startedAt)}–${formatClock(period.endedAt)} ` +
        `(${formatDuration(period.endedAt - period.startedAt)}: ${formatNumber(period.generationTokens)} tokens generated, ` +
        `${formatNumber(period.requests)} requests finished)`;
}

function setFlag(element: HTMLElement, name: "notReported" | "estimated" | "lastActive", on: boolean): void {
    if (on && element.dataset[name] !== "true")
        element.dataset[name] = "true";
    else if (!on && element.dataset[name] !== undefined)
        delete element.dataset[name];
}
