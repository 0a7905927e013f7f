/** KV-cache usage (%) and VRAM used (GiB) over time. */
import type {Theme} from "../theme.js";
import type {ChartJs} from "./chartSetup.js";
import {TimeSeriesChart} from "./timeSeriesChart.js";

const gib = 1024 ** 3;

export function cacheChart(chartjs: ChartJs, theme: Theme): TimeSeriesChart {
    return new TimeSeriesChart(chartjs, {
        name: "cache", title: "KV cache & VRAM",
        series: [
            {label: "KV cache %", color: "green", axis: "y", value: (p) => p.kvCacheUsage * 100, fill: true},
            {label: "VRAM GiB", color: "red", axis: "y1", value: (p) => p.vramUsedBytes / gib}
        ],
        axes: [{id: "y", title: "KV cache %", max: 100}, {id: "y1", title: "VRAM GiB"}]
    }, theme);
}
