/**
 * bench:peer's ratios ours / llama-server, two ways: the ratio of the medians over repeats (the table's), and the
 * median of the per-repeat ratios with its order-statistic interval. The runs of one repeat are next to each other
 * in time, so the per-repeat ratio cancels most of what the machine's load does to both sides; its interval says
 * whether a target (throughput ≥ 0.9, P99 ITL ≤ 1.2) is met or only landed on its side by chance.
 */
import {formatMedianInterval, medianInterval, type MedianInterval} from "../extension/host/bench/medianInterval.js";

export type PeerRunMetrics = {repeat: number, target: string, output_throughput: number, median_ttft_ms: number, p99_itl_ms: number};

export type PairedRatios = {
    target: string,
    throughput: MedianInterval,
    ttft: MedianInterval,
    p99_itl: MedianInterval
};

/** Per-repeat ratios of `target` over llama-server in one cell's runs; undefined when no repeat has both. */
export function pairedRatios(cell: readonly PeerRunMetrics[], target: string): PairedRatios | undefined {
    const pairs: Array<[PeerRunMetrics, PeerRunMetrics]> = [];
    for (const ours of cell.filter((r) => r.target === target)) {
        const peer = cell.find((r) => r.target === "llama-server" && r.repeat === ours.repeat);
        if (peer !== undefined)
            pairs.push([ours, peer]);
    }
    if (pairs.length === 0)
        return undefined;
    const ratio = (key: "output_throughput" | "median_ttft_ms" | "p99_itl_ms") => medianInterval(pairs.map(([o, p]) => o[key] / p[key]));
    return {target, throughput: ratio("output_throughput"), ttft: ratio("median_ttft_ms"), p99_itl: ratio("p99_itl_ms")};
}

/** `ipc per repeat: throughput 0.95 (…), TTFT p50 …, ITL p99 …`. */
export function describePairedRatios(ratios: PairedRatios): string {
    const f = (interval: MedianInterval) => formatMedianInterval(interval, 3, "repeats");
    return `${ratios.target} per repeat: throughput ${f(ratios.throughput)}, TTFT p50 ${f(ratios.ttft)}, ITL p99 ${f(ratios.p99_itl)}`;
}
