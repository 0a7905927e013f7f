/**
 * A live line chart over the store's time series: x = epoch ms (host clock) over the selected
 * window, one dataset per series, up to two y axes. Updates mutate the datasets and call
 * `chart.update("none")`; the chart is created once.
 */
import type {Chart, ChartDataset, ChartOptions, Point, Scale} from "chart.js" with {"resolution-mode": "import"};
import type {TimeSeriesPoint} from "../../protocol/statsView.js";
import {withAlpha, type SeriesColorName, type Theme} from "../theme.js";
import {chartCard, type ChartContext, type LiveChart} from "./chartCard.js";
import {applyAxisTheme, clockLabel, clockTicks, type ChartJs} from "./chartSetup.js";

/** The shortest time span a chart shows. */
const minSpanMs = 30_000;

export type SeriesSpec = {
    label: string,
    color: SeriesColorName,
    axis: "y" | "y1",
    /** The value of a point; null = no value (a gap). */
    value(point: TimeSeriesPoint): number | null,
    dashed?: boolean,
    fill?: boolean,
    stepped?: boolean,
    /** Draw the samples as dots too (for sparse series with gaps). */
    points?: boolean
};

export type AxisSpec = {
    id: "y" | "y1",
    title: string,
    /** Fixed range (e.g. 0..100 for percentages). */
    max?: number,
    format?(value: number): string
};

export type TimeSeriesChartSpec = {name: string, title: string, note?: string, series: readonly SeriesSpec[], axes: readonly AxisSpec[]};

export class TimeSeriesChart implements LiveChart {
    readonly name: string;
    readonly element: HTMLElement;
    private readonly chart: Chart<"line", Point[]>;

    constructor(chartjs: ChartJs, private readonly spec: TimeSeriesChartSpec, theme: Theme) {
        this.name = spec.name;
        const card = chartCard(spec.name, spec.title, spec.note);
        this.element = card.element;
        const datasets: Array<ChartDataset<"line", Point[]>> = spec.series.map((series) => ({
            label: series.label, data: [], yAxisID: series.axis, fill: series.fill === true ? "origin" : false,
            stepped: series.stepped === true, pointRadius: series.points === true ? 2 : 0, pointHoverRadius: 3, tension: 0,
            borderDash: series.dashed === true ? [5, 3] : []
        }));
        const scales: NonNullable<ChartOptions<"line">["scales"]> = {
            x: {type: "linear", afterBuildTicks: clockTicks, ticks: {maxRotation: 0, autoSkip: false, callback(this: Scale, value: number | string) {
                return clockLabel(this, Number(value));
            }}}
        };
        for (const axis of spec.axes)
            scales[axis.id] = {
                type: "linear", position: axis.id === "y" ? "left" : "right", beginAtZero: true, ...(axis.max !== undefined ? {max: axis.max} : {}),
                title: {display: true, text: axis.title}, grid: {drawOnChartArea: axis.id === "y"},
                ticks: {
                    maxTicksLimit: 6,
                    ...(axis.format !== undefined ? {callback: (value: number | string) => axis.format!(Number(value))} : {})
                }
            };
        this.chart = new chartjs.Chart<"line", Point[]>(card.canvas, {
            type: "line",
            data: {datasets},
            options: {
                animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true, spanGaps: false,
                interaction: {mode: "nearest", axis: "x", intersect: false},
                plugins: {legend: {position: "bottom", labels: {boxWidth: 12, boxHeight: 2}}, tooltip: {callbacks: {title: (items) => items[0] === undefined ? "" : new Date(items[0].parsed.x ?? 0).toLocaleTimeString()}}},
                scales
            }
        });
        this.applyTheme(theme);
    }

    update({store, windowMs}: ChartContext): void {
        const now = store.t;
        const points = store.series.since(now - windowMs);
        // A young session zooms in on the data it has (at least `minSpanMs`), instead of an empty window.
        const from = Math.max(now - windowMs, Math.min(points[0]?.t ?? now, now - minSpanMs));
        this.spec.series.forEach((series, index) => {
            this.chart.data.datasets[index]!.data = points.map((point) => ({x: point.t, y: series.value(point) ?? Number.NaN}));
        });
        const x = this.chart.options.scales!.x!;
        x.min = from;
        x.max = now;
        this.chart.update("none");
    }

    applyTheme(theme: Theme): void {
        this.spec.series.forEach((series, index) => {
            const dataset = this.chart.data.datasets[index]!;
            const color = theme.colors[series.color];
            dataset.borderColor = color;
            dataset.backgroundColor = series.fill === true ? withAlpha(color, 0.18) : color;
            dataset.pointBackgroundColor = color;
            dataset.borderWidth = theme.lineWidth;
        });
        applyAxisTheme(this.chart, theme);
        this.chart.update("none");
    }
}
