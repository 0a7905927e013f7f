/** Running and waiting requests over time. */
import type {Theme} from "../theme.js";
import type {ChartJs} from "./chartSetup.js";
import {TimeSeriesChart} from "./timeSeriesChart.js";

export function requestsChart(chartjs: ChartJs, theme: Theme): TimeSeriesChart {
    return new TimeSeriesChart(chartjs, {
        name: "requests", title: "Requests", note: "running / waiting",
        series: [
            {label: "running", color: "blue", axis: "y", value: (p) => p.running, stepped: true, fill: true},
            {label: "waiting", color: "yellow", axis: "y", value: (p) => p.waiting, stepped: true}
        ],
        axes: [{id: "y", title: "requests", format: (value) => Number.isInteger(value) ? String(value) : ""}]
    }, theme);
}
