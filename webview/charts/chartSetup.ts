/**
 * chart.js, registered once with only the parts the panel uses (bundled; no CDN, no eval).
 * Shared options: no animation, theme colours, a linear epoch-ms time axis with clock labels.
 */
import type {Scale} from "chart.js" with {"resolution-mode": "import"};
import type * as ChartJsModule from "chart.js" with {"resolution-mode": "import"};
import {formatClock} from "../../common/format.js";
import type {Theme} from "../theme.js";

/** The chart.js module (ESM-only: loaded with a dynamic import, which esbuild inlines into the bundle). */
export type ChartJs = typeof ChartJsModule;

let loaded: Promise<ChartJs> | undefined;

/** chart.js with the parts the panel uses registered. */
export function loadChartJs(): Promise<ChartJs> {
    loaded ??= import("chart.js").then((chartjs) => {
        chartjs.Chart.register(chartjs.LineController, chartjs.LineElement, chartjs.PointElement, chartjs.BarController, chartjs.BarElement,
            chartjs.ScatterController, chartjs.LinearScale, chartjs.LogarithmicScale, chartjs.CategoryScale, chartjs.Filler, chartjs.Legend,
            chartjs.Tooltip);
        return chartjs;
    });
    return loaded;
}

/** Defaults every chart picks up (font, text colour); charts re-apply their own colours too. */
export function applyChartDefaults({Chart}: ChartJs, theme: Theme): void {
    Chart.defaults.font.family = theme.fontFamily;
    Chart.defaults.font.size = 11;
    Chart.defaults.color = theme.foreground;
    Chart.defaults.borderColor = theme.grid;
}

const tickSteps = [1, 2, 5, 10, 15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600].map((s) => s * 1000);

/** A tick step (ms) that gives at most `maxTicks` ticks over `spanMs`. */
export function timeStep(spanMs: number, maxTicks = 7, steps: readonly number[] = tickSteps): number {
    return steps.find((step) => spanMs / step <= maxTicks) ?? steps[steps.length - 1]!;
}

/** Sub-second tick steps (ms), for short spans such as a fast request waterfall. */
const fineSteps = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/**
 * Replaces a linear scale's ticks by round clock times (multiples of a step from the epoch) between
 * its min and max: use as `afterBuildTicks` of an epoch-ms x axis.
 */
export function clockTicks(scale: Scale): void {
    const {min, max} = scale;
    const span = max - min;
    if (!(span > 0))
        return;
    // room for each label: HH:MM:SS needs ~70 px, with decimals ~95 px
    const maxTicks = Math.max(2, Math.floor(scale.width / (span < 20_000 ? 95 : 70)));
    const step = span < 10_000 ? timeStep(span, maxTicks, fineSteps) : timeStep(span, maxTicks);
    const ticks: Array<{value: number}> = [];
    for (let value = Math.ceil(min / step) * step; value <= max; value += step)
        ticks.push({value});
    scale.ticks = ticks;
}

/** Tick label: clock time, with as many decimals of a second as the axis span needs. */
export function clockLabel(scale: Scale, value: number): string {
    const label = formatClock(value);
    const span = scale.max - scale.min;
    const decimals = span >= 20_000 ? 0 : span >= 2_000 ? 1 : span >= 200 ? 2 : 3;
    if (decimals === 0)
        return label;
    const fraction = (((value % 1000) + 1000) % 1000) / 1000;
    return `${label}${fraction.toFixed(decimals).slice(1)}`;
}

/** Axis colours for a theme (chart.js scale options subset). */
export function axisColors(theme: Theme): {ticks: {color: string}, grid: {color: string}, border: {color: string}, title: {color: string}} {
    return {ticks: {color: theme.muted}, grid: {color: theme.grid}, border: {color: theme.border}, title: {color: theme.muted}};
}

type ThemedScale = {ticks?: object, grid?: object, border?: object, title?: object};
type ThemedOptions = {scales?: Record<string, ThemedScale | undefined>, plugins?: {legend?: {labels?: {color?: unknown}}}};

/** Re-colours a chart's axes and legend for a theme (call `chart.update("none")` after). */
export function applyAxisTheme(chart: {options: object}, theme: Theme): void {
    const options = chart.options as ThemedOptions;
    const colors = axisColors(theme);
    for (const scale of Object.values(options.scales ?? {})) {
        if (scale === undefined)
            continue;
        scale.ticks = {...scale.ticks, ...colors.ticks};
        scale.grid = {...scale.grid, ...colors.grid};
        scale.border = {...scale.border, ...colors.border};
        if (scale.title !== undefined)
            scale.title = {...scale.title, ...colors.title};
    }
    const legend = options.plugins?.legend?.labels;
    if (legend !== undefined)
        legend.color = theme.foreground;
}
