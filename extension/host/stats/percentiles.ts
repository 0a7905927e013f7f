import type {PercentileSummary} from "./statsTypes.js";

/**
 * The q-quantile (0..1) of values sorted ascending, by linear interpolation between the closest
 * ranks — numpy's default `np.percentile` method, which vLLM's benchmark uses. Exact: computed from
 * the values themselves, not from histogram buckets.
 */
export function quantileOfSorted(sorted: ArrayLike<number>, q: number): number | null {
    const n = sorted.length;
    if (n === 0)
        return null;
    const index = q * (n - 1);
    const lo = Math.floor(index);
    const hi = Math.ceil(index);
    const low = sorted[lo]!;
    return lo === hi ? low : low + (sorted[hi]! - low) * (index - lo);
}

/** count, mean, p50/p90/p99 and max of the values (any order); nulls when there are none. */
export function summarize(values: ArrayLike<number>): PercentileSummary {
    const sorted = Float64Array.from(values).sort();
    const n = sorted.length;
    let sum = 0;
    for (const value of sorted)
        sum += value;
    return {
        count: n,
        mean: n === 0 ? null : sum / n,
        p50: quantileOfSorted(sorted, 0.5),
        p90: quantileOfSorted(sorted, 0.9),
        p99: quantileOfSorted(sorted, 0.99),
        max: n === 0 ? null : sorted[n - 1]!
    };
}
