/**
 * The per-request waterfall of the last ~50 requests (newest at the top): floating horizontal bars
 * for queue (queued → scheduled), prefill (scheduled → first token) and decode (first token → last
 * token, or now while running), from the RequestLifecycle timestamps (host clock); preemptions as red
 * crosses. Decode bars of failed or aborted requests are drawn in red. A select in the card's heading
 * (`data-action="timeline-client"`) shows one client label's requests only (page-side filtering).
 * Hovering a row's bar says how long that phase took, then how fast the request went: its own output
 * tok/s, TTFT and mean ITL (requestSpeed.ts).
 */
import type {Chart, ChartDataset, Scale, TooltipItem} from "chart.js" with {"resolution-mode": "import"};
import type {} from "../../protocol/statsView.js";
import {el} from "../dom.js";
import {withAlpha, type Theme} from "../theme.js";
import {chartCard, type ChartContext, type LiveChart} from "./chartCard.js";
import {applyAxisTheme, clockLabel, clockTicks, type ChartJs} from "./chartSetup.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {formatClock, formatNumber} from "../../common/format.js";
import {requestSpeedLines} from "./requestSpeed.js";

export const timelineRows = 50;

type Span = [number, number];
type Bar = Span | null;
/** A preemption cross; `row`: the index of its row in the rows shown. */
type Marker = {x: number, y: string, row: number};

export type TimelineRow = {
    id: string, client: string, label: string, queue: Bar, prefill: Bar, decode: Bar, failed: boolean, preemptions: number[],
    /** The tooltip's lines about the whole request (its output tok/s, TTFT, mean ITL, the engine sequence it ran on). */
    speed: string[]
};

/** Rows for the most recent requests (of `client` only, when given), newest first; `now` ends the open segments. */
export function timelineRowsOf(requests: Iterable<RequestLifecycle>, now: number, limit = timelineRows, client?: string): TimelineRow[] {
    const recent: RequestLifecycle[] = [];
    for (const record of requests) {
        if (client !== undefined && record.client !== client)
            continue;
        recent.push(record);
        if (recent.length > limit)
            recent.shift();
    }
    return recent.reverse().map((record) => {
        const queueStart = record.queued ?? record.inputProcessed ?? record.arrival;
        const end = record.lastToken ?? record.finished ?? now;
        const span = (from: number | undefined, to: number | undefined): Bar =>
            from === undefined || to === undefined ? null : [from, Math.max(from, to)];
        return {
            id: record.id,
            client: record.client,
            label: `${record.client} · ${record.id.slice(0, 6)} · ${record.generatedTokens} tok`,
            queue: span(queueStart, record.scheduled ?? (record.phase === "finished" ? record.finished : now)),
            prefill: span(record.scheduled, record.firstToken ?? (record.phase === "finished" ? record.finished : now)),
            decode: record.firstToken === undefined ? null : span(record.firstToken, end),
            failed: record.reason === "error" || record.reason === "abort",
            preemptions: record.preemptions,
            speed: [...requestSpeedLines(record, now), ...record.sequence !== undefined ? [`sequence ${record.sequence}`] : []]
        };
    });
}

export class TimelineChart implements LiveChart {
    readonly name = "timeline";
    readonly element: HTMLElement;
    private readonly box: HTMLElement;
    /** Public for tests (hovering a bar, reading the tooltip). */
    readonly chart: Chart<"bar" | "scatter", Array<Bar | Marker>, string>;
    private theme: Theme;
    private rows = 0;
    private readonly clientSelect = el("select");
    /** The option values of `clientSelect` after "All clients" (JSON), to rebuild them only when they change. */
    private clientOptionsKey = "";
    private client: string | undefined;
    private lastContext: ChartContext | undefined;
    private shown: readonly TimelineRow[] = [];

    constructor(chartjs: ChartJs, theme: Theme) {
        const card = chartCard(this.name, "Request timeline", `last ${timelineRows} requests, newest on top`, "card span-2");
        this.element = card.element;
        this.box = card.box;
        this.theme = theme;
        const filter = el("label", "card-filter");
        this.clientSelect.dataset.action = "timeline-client";
        this.clientSelect.append(clientOption("", "All clients"));
        this.clientSelect.addEventListener("change", () => {
            this.client = this.clientSelect.value === "" ? undefined : this.clientSelect.value;
            if (this.lastContext !== undefined)
                this.update(this.lastContext);
        });
        filter.append("Client ", this.clientSelect);
        card.heading.append(filter);
        const bar = (label: string): ChartDataset<"bar", Bar[]> => ({
            type: "bar", label, data: [], grouped: false, borderSkipped: false, barPercentage: 0.9, categoryPercentage: 0.9
        });
        const markers: ChartDataset<"scatter", Marker[]> = {type: "scatter", label: "preemption", data: [], pointStyle: "crossRot", pointRadius: 5};
        this.chart = new chartjs.Chart<"bar" | "scatter", Array<Bar | Marker>, string>(card.canvas, {
            type: "bar",
            data: {labels: [], datasets: [bar("queue"), bar("prefill"), bar("decode"), markers] as Array<ChartDataset<"bar" | "scatter", Array<Bar | Marker>>>},
            options: {
                animation: false, responsive: true, maintainAspectRatio: false, indexAxis: "y",
                plugins: {
                    legend: {position: "bottom", labels: {boxWidth: 12}},
                    tooltip: {callbacks: {
                        label: (item) => this.tooltipLabel(item),
                        afterBody: (items) => {
                            const item = items[0];
                            return item === undefined ? [] : this.shown[rowIndexOf(item)]?.speed ?? [];
                        }
                    }}
                },
                scales: {
                    x: {type: "linear", afterBuildTicks: clockTicks, ticks: {maxRotation: 0, autoSkip: false, callback(this: Scale, value: number | string) {
                        return clockLabel(this, Number(value));
                    }}},
                    y: {type: "category", ticks: {autoSkip: false, font: {size: 10}}}
                }
            }
        });
        this.applyTheme(theme);
    }

    /** The rows drawn by the last update, newest first. */
    get shownRows(): readonly TimelineRow[] {
        return this.shown;
    }

    update(context: ChartContext): void {
        this.lastContext = context;
        const store = context.store;
        this.updateClientOptions(store.requests.values());
        const rows = timelineRowsOf(store.requests.values(), store.t, timelineRows, this.client);
        this.shown = rows;
        const chart = this.chart;
        chart.data.labels = rows.map((row) => row.label);
        const [queue, prefill, decode, markers] = chart.data.datasets;
        queue!.data = rows.map((row) => row.queue);
        prefill!.data = rows.map((row) => row.prefill);
        decode!.data = rows.map((row) => row.decode);
        const red = this.theme.colors.red;
        decode!.backgroundColor = rows.map((row) => row.failed ? red : this.theme.colors.blue);
        markers!.data = rows.flatMap((row, index) => row.preemptions.map((t) => ({x: t, y: row.label, row: index})));
        let lo = Number.POSITIVE_INFINITY;
        let hi = Number.NEGATIVE_INFINITY;
        for (const row of rows)
            for (const span of [row.queue, row.prefill, row.decode])
                if (span !== null) {
                    lo = Math.min(lo, span[0]);
                    hi = Math.max(hi, span[1]);
                }
        const x = chart.options.scales!.x!;
        x.min = Number.isFinite(lo) ? lo : store.t - 60_000;
        x.max = Number.isFinite(hi) ? hi + Math.max(1, (hi - lo) * 0.02) : store.t;
        if (rows.length !== this.rows) {
            this.rows = rows.length;
            this.box.style.height = `${Math.min(860, Math.max(200, 70 + rows.length * 16))}px`;
        }
        chart.update("none");
    }

    /** "queue 5 ms", "decode 45 ms" for a bar; "preempted at 12:03:04" for a cross. */
    private tooltipLabel(item: TooltipItem<"bar" | "scatter">): string {
        const raw = item.raw as Bar | Marker;
        if (raw === null)
            return "";
        if (!Array.isArray(raw))
            return `preempted at ${formatClock(raw.x)}`;
        return `${item.dataset.label ?? ""} ${formatNumber(raw[1] - raw[0])} ms`;
    }

    /** "All clients", then every label of the requests held (in order of first arrival), and the selected one. */
    private updateClientOptions(requests: Iterable<RequestLifecycle>): void {
        const labels = new Set<string>();
        for (const record of requests)
            labels.add(record.client);
        if (this.client !== undefined)
            labels.add(this.client);
        const key = JSON.stringify([...labels]);
        if (key === this.clientOptionsKey)
            return;
        this.clientOptionsKey = key;
        this.clientSelect.replaceChildren(clientOption("", "All clients"), ...[...labels].map((label) => clientOption(label, label)));
        this.clientSelect.value = this.client ?? "";
    }

    applyTheme(theme: Theme): void {
        this.theme = theme;
        const [queue, prefill, decode, markers] = this.chart.data.datasets;
        queue!.backgroundColor = withAlpha(theme.colors.yellow, 0.85);
        prefill!.backgroundColor = withAlpha(theme.colors.orange, 0.9);
        decode!.backgroundColor = theme.colors.blue;
        markers!.borderColor = theme.colors.red;
        markers!.backgroundColor = theme.colors.red;
        markers!.borderWidth = 2;
        applyAxisTheme(this.chart, theme);
        this.chart.update("none");
    }
}

/** The row a tooltip item belongs to: the bar's index, or the row a preemption cross sits on. */
function rowIndexOf(item: TooltipItem<"bar" | "scatter">): number {
    const raw = item.raw as Bar | Marker;
    return raw !== null && !Array.isArray(raw) ? raw.row : item.dataIndex;
}

function clientOption(value: string, text: string): HTMLOptionElement {
    const option = el("option", undefined, text);
    option.value = value;
    return option;
}
