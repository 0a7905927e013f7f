/**
 * TTFT, ITL and e2e latency distributions from the histogram buckets: each drawn as a step line over
 * a log time axis, as the share (%) of its observations per bucket, so the three are comparable
 * although their buckets differ. The x range covers the non-empty buckets.
 */
import type {Chart, ChartDataset, Point, Scale} from "chart.js" with {"resolution-mode": "import"};
import type {HistogramMetric, HistogramView} from "../../protocol/statsView.js";
import {withAlpha, type SeriesColorName, type Theme} from "../theme.js";
import {chartCard, type ChartContext, type LiveChart} from "./chartCard.js";
import {applyAxisTheme, type ChartJs} from "./chartSetup.js";

const distributions: ReadonlyArray<{metric: HistogramMetric, label: string, color: SeriesColorName}> = [
    {metric: "ttft", label: "TTFT", color: "orange"},
    {metric: "itl", label: "ITL", color: "green"},
    {metric: "e2e", label: "E2E", color: "blue"}
];

/** Step points of one histogram: bucket i spans (bound[i-1], bound[i]]; the overflow bucket ends at 2 × the last bound. */
export function histogramSteps(view: HistogramView): Point[] {
    if (view.count === 0 || view.bounds.length === 0)
        return [];
    const upper = (i: number): number => i < view.bounds.length ? view.bounds[i]! : view.bounds[view.bounds.length - 1]! * 2;
    const points: Point[] = [{x: view.bounds[0]! / 2, y: 0}];
    view.counts.forEach((count, i) => points.push({x: upper(i), y: (count / view.count) * 100}));
    return points;
}

/** The x range [lo, hi] covering the non-empty buckets of all views (one bucket of margin). */
function nonEmptyRange(views: readonly HistogramView[]): [number, number] | undefined {
    let lo = Number.POSITIVE_INFINITY;
    let hi = 0;
    for (const view of views)
        view.counts.forEach((count, i) => {
            if (count === 0)
                return;
            const bounds = view.bounds;
            const lower = i === 0 ? bounds[0]! / 2 : bounds[i - 1]!;
            const upper = i < bounds.length ? bounds[i]! : bounds[bounds.length - 1]! * 2;
            lo = Math.min(lo, lower);
            hi = Math.max(hi, upper);
        });
    return hi > 0 ? [lo / 2, hi * 2] : undefined;
}

function secondsLabel(value: number): string {
    const exponent = Math.log10(value);
    if (Math.abs(exponent - Math.round(exponent)) > 1e-9)
        return "";
    return value < 1 ? `${+(value * 1000).toPrecision(3)} ms` : `${+value.toPrecision(3)} s`;
}

export class HistogramChart implements LiveChart {
    readonly name = "histograms";
    readonly element: HTMLElement;
    private readonly chart: Chart<"line", Point[]>;

    constructor(chartjs: ChartJs, theme: Theme) {
        const card = chartCard(this.name, "Latency distributions", "% of observations per bucket", "card span-2");
        this.element = card.element;
        const datasets: Array<ChartDataset<"line", Point[]>> = distributions.map(({label}) => ({
            label, data: [], stepped: "before", fill: "origin", pointRadius: 0, tension: 0
        }));
        this.chart = new chartjs.Chart<"line", Point[]>(card.canvas, {
            type: "line",
            data: {datasets},
            options: {
                animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
                interaction: {mode: "nearest", intersect: false},
                plugins: {legend: {position: "bottom", labels: {boxWidth: 12, boxHeight: 2}}},
                scales: {
                    x: {type: "logarithmic", min: 0.001, max: 10, title: {display: true, text: "seconds (log)"},
                        ticks: {autoSkip: false, maxRotation: 0, callback: (value: number | string) => secondsLabel(Number(value))},
                        afterBuildTicks: (scale: Scale) => {
                            scale.ticks = scale.ticks.filter((tick) => secondsLabel(tick.value) !== "");
                        }},
                    y: {type: "linear", beginAtZero: true, suggestedMax: 10, title: {display: true, text: "%"}, ticks: {maxTicksLimit: 6}}
                }
            }
        });
        this.applyTheme(theme);
    }

    update({store}: ChartContext): void {
        const histograms = store.view.histograms;
        const views = distributions.map(({metric}) => histograms[metric]);
        views.forEach((view, i) => {
            this.chart.data.datasets[i]!.data = histogramSteps(view);
        });
        const range = nonEmptyRange(views);
        const x = this.chart.options.scales!.x!;
        x.min = range?.[0] ?? 0.001;
        x.max = range?.[1] ?? 10;
        this.chart.update("none");
    }

    applyTheme(theme: Theme): void {
        distributions.forEach(({color}, i) => {
            const dataset = this.chart.data.datasets[i]!;
            dataset.borderColor = theme.colors[color];
            dataset.backgroundColor = withAlpha(theme.colors[color], 0.15);
            dataset.borderWidth = theme.lineWidth;
        });
        applyAxisTheme(this.chart, theme);
        this.chart.update("none");
    }
}
