/** TTFT and ITL p50 / p99 per sample interval (ms) over time. */
import type {Theme} from "../theme.js";
import type {ChartJs} from "./chartSetup.js";
import {TimeSeriesChart} from "./timeSeriesChart.js";

const ms = (seconds: number | null): number | null => seconds === null ? null : seconds * 1000;

export function latencyChart(chartjs: ChartJs, theme: Theme): TimeSeriesChart {
    return new TimeSeriesChart(chartjs, {
        name: "latency", title: "Latency", note: "ms, per sample",
        series: [
            {label: "TTFT p50", color: "orange", axis: "y", value: (p) => ms(p.ttftP50S), points: true},
            {label: "TTFT p99", color: "orange", axis: "y", value: (p) => ms(p.ttftP99S), points: true, dashed: true},
            {label: "ITL p50", color: "green", axis: "y", value: (p) => ms(p.itlP50S), points: true},
            {label: "ITL p99", color: "green", axis: "y", value: (p) => ms(p.itlP99S), points: true, dashed: true}
        ],
        axes: [{id: "y", title: "ms"}]
    }, theme);
}
