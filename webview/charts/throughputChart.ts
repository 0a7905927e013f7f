/** Prompt and generation tokens/s (sliding window) over time. */
import type {Theme} from "../theme.js";
import type {ChartJs} from "./chartSetup.js";
import {TimeSeriesChart} from "./timeSeriesChart.js";

export function throughputChart(chartjs: ChartJs, theme: Theme): TimeSeriesChart {
    return new TimeSeriesChart(chartjs, {
        name: "throughput", title: "Throughput", note: "tokens/s",
        series: [
            {label: "generation", color: "blue", axis: "y", value: (p) => p.generationTokensPerS, fill: true},
            {label: "prompt", color: "purple", axis: "y", value: (p) => p.promptTokensPerS}
        ],
        axes: [{id: "y", title: "tokens/s"}]
    }, theme);
}
