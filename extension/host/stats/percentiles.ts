/**
 * The one percentile implementation (host side): numpy's default `np.percentile` method — linear
 * interpolation between the closest ranks — which vLLM's benchmark uses. Exact: computed from the
 * values themselves, not from histogram buckets.
 */
import type {PercentileSummary} from "../../../protocol/statsView.js";

/** The value at fractional rank `index` (0-based) between order statistics `low` (rank floor(index)) and `high` (the next). */
function interpolate(low: number, high: number, index: number): number {
    const fraction = index - Math.floor(index);
    return fraction === 0 ? low : low + (high - low) * fraction;
}

/** The q-quantile (0..1) of values sorted ascending; null when there are none. */
export function quantileOfSorted(sorted: ArrayLike<number>, q: number): number | null {
    const n = sorted.length;
    if (n === 0)
        return null;
    const index = q * (n - 1);
    return interpolate(sorted[Math.floor(index)]!, sorted[Math.ceil(index)]!, index);
}

/**
 * The p-th percentile (0..100) of values in any order, as `numpy.percentile(values, p)`; 0 when there
 * are none, as vLLM's benchmark (`np.percentile(values or 0, p)`). Quickselect on a copy, no sort.
 */
export function percentile(values: ArrayLike<number>, p: number): number {
    return values.length === 0 ? 0 : quantileBySelect(Float64Array.from(values), p / 100, 0).value;
}

/**
 * The k-th smallest value (0-based) of `values`, partially reordering it in place (Hoare's
 * quickselect, median-of-three pivot): O(n) on average instead of a full sort's O(n log n).
 * Successive calls with increasing k on the same array reuse the earlier partitioning.
 */
function select(values: Float64Array, k: number, from: number): number {
    let lo = from;
    let hi = values.length - 1;
    while (hi > lo) {
        const mid = (lo + hi) >>> 1;
        const a = values[lo]!, b = values[mid]!, c = values[hi]!;
        const pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        let i = lo;
        let j = hi;
        while (i <= j) {
            while (values[i]! < pivot) i++;
            while (values[j]! > pivot) j--;
            if (i <= j) {
                const t = values[i]!;
                values[i] = values[j]!;
                values[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return values[k]!;
    }
    return values[k]!;
}

/** The q-quantile by numpy's linear interpolation, from order statistics found by quickselect. */
function quantileBySelect(values: Float64Array, q: number, from: number): {value: number, rank: number} {
    const index = q * (values.length - 1);
    const lo = Math.floor(index);
    const low = select(values, lo, from);
    if (index === lo)
        return {value: low, rank: lo};
    // After selecting rank lo, everything right of it is >= it: the next rank is their minimum.
    let high = Number.POSITIVE_INFINITY;
    for (let i = lo + 1; i < values.length; i++)
        if (values[i]! < high) high = values[i]!;
    return {value: interpolate(low, high, index), rank: lo};
}

/**
 * count, mean, p50/p90/p99 and max of the values (any order); nulls when there are none. Exact
 * (numpy's linear method), without sorting: three quickselects over one copy.
 */
export function summarize(values: ArrayLike<number>): PercentileSummary {
    const n = values.length;
    if (n === 0)
        return {count: 0, mean: null, p50: null, p90: null, p99: null, max: null};
    const copy = Float64Array.from(values);
    let sum = 0;
    let max = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < n; i++) {
        const value = copy[i]!;
        sum += value;
        if (value > max) max = value;
    }
    const p50 = quantileBySelect(copy, 0.5, 0);
    const p90 = quantileBySelect(copy, 0.9, p50.rank);
    const p99 = quantileBySelect(copy, 0.99, p90.rank);
    return {count: n, mean: sum / n, p50: p50.value, p90: p90.value, p99: p99.value, max};
}
