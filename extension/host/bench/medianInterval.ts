/**
 * How sure a benchmark's median is: the distribution-free confidence interval of a median from the
 * order statistics (the sign test's interval). With n values sorted, [x(k), x(n+1−k)] covers the true
 * median with probability 1 − 2·P(Binomial(n, ½) < k), whatever the distribution; k is the largest
 * that keeps that coverage at or above the asked confidence. Below 6 values no interval reaches 95 %:
 * then it is [min, max] with the coverage it does have (n = 5: 93.75 %).
 *
 * The benchmarks' targets (a ratio ≥ 0.98, ≤ 1.03) are often inside this machine's run-to-run noise;
 * the interval says whether a median meets a target or only lands on its side by chance.
 */
import {percentile} from "../stats/percentiles.js";

export type MedianInterval = {
    median: number,
    low: number,
    high: number,
    /** The interval's exact coverage (≥ the asked confidence unless there were too few values). */
    coverage: number,
    n: number
};

/** P(Binomial(n, ½) ≤ k) for k = 0…n, exactly enough for the benchmarks' n (a few hundred at most). */
function binomialHalfCdf(n: number): number[] {
    const cdf: number[] = [];
    let logChoose = 0; // log C(n, k)
    let sum = 0;
    for (let k = 0; k <= n; k++) {
        if (k > 0)
            logChoose += Math.log(n - k + 1) - Math.log(k);
        sum += Math.exp(logChoose - n * Math.LN2);
        cdf.push(Math.min(1, sum));
    }
    return cdf;
}

/** The median of `values` and its order-statistic confidence interval (default 95 %). Throws on no values. */
export function medianInterval(values: readonly number[], confidence = 0.95): MedianInterval {
    const n = values.length;
    if (n === 0)
        throw new Error("medianInterval: no values");
    if (!(confidence > 0 && confidence < 1))
        throw new Error(`medianInterval: confidence must be between 0 and 1, got ${confidence}`);
    const sorted = [...values].sort((a, b) => a - b);
    const cdf = binomialHalfCdf(n);
    const coverageOf = (k: number): number => 1 - 2 * cdf[k - 1]!;
    // k = 1 is [min, max]; a larger k narrows it while the coverage still holds.
    let k = 1;
    while (k + 1 <= n + 1 - (k + 1) && coverageOf(k + 1) >= confidence)
        k++;
    return {median: percentile(sorted, 50), low: sorted[k - 1]!, high: sorted[n - k]!, coverage: coverageOf(k), n};
}

/** `0.981 (95 % interval 0.950–1.003, 9 pairs)`, or the exact coverage when fewer values allow no more. */
export function formatMedianInterval(interval: MedianInterval, digits = 3, unit = "pairs"): string {
    const coverage = `${(Math.floor(interval.coverage * 1000) / 10).toFixed(1)} %`;
    return `${interval.median.toFixed(digits)} (${coverage} interval ${interval.low.toFixed(digits)}–${interval.high.toFixed(digits)}, ${interval.n} ${unit})`;
}
