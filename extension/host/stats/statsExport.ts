import type {StatsSnapshotView, TimeSeriesPoint} from "./statsTypes.js";

/** The whole snapshot (engine, counters, gauges, percentiles, histograms, series, request lifecycles). */
export function statsToJson(snapshot: StatsSnapshotView): string {
    return JSON.stringify({exportedAt: new Date(snapshot.t).toISOString(), ...snapshot}, null, 2) + "\n";
}

const columns: Array<keyof TimeSeriesPoint> = [
    "t", "promptTokensPerS", "generationTokensPerS", "requestsPerS", "ttftP50S", "ttftP99S", "itlP50S", "itlP99S",
    "running", "waiting", "kvCacheUsage", "vramUsedBytes"
];

/** The time series, one row per sample; `time` is ISO 8601, empty cells for samples without values. */
export function statsToCsv(snapshot: StatsSnapshotView): string {
    const header = ["time", ...columns].join(",");
    const rows = snapshot.timeSeries.map((point) =>
        [new Date(point.t).toISOString(), ...columns.map((column) => point[column] ?? "")].join(","));
    return [header, ...rows].join("\n") + "\n";
}
