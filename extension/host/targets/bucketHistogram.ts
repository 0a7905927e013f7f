/**
 * Prometheus histograms as scraped: cumulative bucket counts by upper bound (`le`), ending with +Inf.
 * Quantiles are estimated as PromQL's `histogram_quantile` does (linear interpolation inside the
 * bucket that holds the rank); windows are differences of two scrapes; replicas merge bucket-wise,
 * which is exact when they share bounds (vLLM's replicas do) and is refused otherwise.
 */

/** One histogram series: `counts[i]` observations ≤ `bounds[i]`; the last bound is +Infinity. */
export type BucketHistogram = {
    readonly bounds: readonly number[],
    readonly counts: readonly number[],
    readonly sum: number,
    readonly count: number
};

export class HistogramShapeError extends Error {
    override readonly name = "HistogramShapeError";
}

/** Checks the shape a scrape must have: ascending bounds ending with +Inf, as many counts, none negative. */
export function checkHistogram(histogram: BucketHistogram, what: string): void {
    const {bounds, counts} = histogram;
    if (bounds.length === 0 || bounds[bounds.length - 1] !== Number.POSITIVE_INFINITY)
        throw new HistogramShapeError(`${what}: the last bucket must be le="+Inf"`);
    if (counts.length !== bounds.length)
        throw new HistogramShapeError(`${what}: ${bounds.length} bucket bounds but ${counts.length} counts`);
    for (let i = 0; i < bounds.length; i++) {
        if (Number.isNaN(bounds[i]!) || (i > 0 && !(bounds[i]! > bounds[i - 1]!)))
            throw new HistogramShapeError(`${what}: bucket bounds must ascend, got ${bounds[i - 1]} then ${bounds[i]}`);
        if (!(counts[i]! >= 0))
            throw new HistogramShapeError(`${what}: bucket le="${bounds[i]}" has count ${counts[i]}`);
    }
}

/**
 * PromQL's `histogram_quantile(q, …)` on one histogram: null when it holds no observations. A rank in
 * the +Inf bucket gives the highest finite bound; in the first bucket the lower end is 0 (or the
 * bound itself when that is ≤ 0). Counts that dip (float noise) are treated as flat, as Prometheus does.
 */
export function histogramQuantile(q: number, histogram: BucketHistogram): number | null {
    const {bounds} = histogram;
    const counts = monotonic(histogram.counts);
    const total = counts[counts.length - 1] ?? 0;
    if (bounds.length < 2 || !(total > 0) || Number.isNaN(q))
        return null;
    if (q < 0)
        return Number.NEGATIVE_INFINITY;
    if (q > 1)
        return Number.POSITIVE_INFINITY;
    const rank = q * total;
    let b = counts.findIndex((count) => count >= rank);
    if (b === -1)
        b = counts.length - 1;
    if (b === bounds.length - 1)
        return bounds[bounds.length - 2]!;
    if (b === 0 && bounds[0]! <= 0)
        return bounds[0]!;
    const start = b === 0 ? 0 : bounds[b - 1]!;
    const below = b === 0 ? 0 : counts[b - 1]!;
    const inBucket = counts[b]! - below;
    if (inBucket === 0)
        return bounds[b]!;
    return start + (bounds[b]! - start) * ((rank - below) / inBucket);
}

/**
 * What was observed between two scrapes of the same series (`later` − `earlier`). A count that went
 * down means the server restarted: then everything in `later` is new, as Prometheus's `increase()` takes it.
 */
export function histogramIncrease(later: BucketHistogram, earlier: BucketHistogram | undefined): BucketHistogram {
    if (earlier === undefined || !sameBounds(later, earlier) || later.count < earlier.count ||
        later.counts.some((count, i) => count < earlier.counts[i]!))
        return later;
    return {
        bounds: later.bounds,
        counts: later.counts.map((count, i) => count - earlier.counts[i]!),
        sum: later.sum - earlier.sum,
        count: later.count - earlier.count
    };
}

/** Replicas' histograms added bucket-wise; throws HistogramShapeError when their bounds differ. */
export function mergeHistograms(histograms: readonly BucketHistogram[]): BucketHistogram | undefined {
    const [first, ...rest] = histograms;
    if (first === undefined)
        return undefined;
    const counts = [...first.counts];
    let sum = first.sum;
    let count = first.count;
    for (const histogram of rest) {
        if (!sameBounds(first, histogram))
            throw new HistogramShapeError(`cannot merge histograms with different buckets: [${first.bounds.join(", ")}] and [${histogram.bounds.join(", ")}]`);
        histogram.counts.forEach((c, i) => counts[i]! += c);
        sum += histogram.sum;
        count += histogram.count;
    }
    return {bounds: first.bounds, counts, sum, count};
}

function sameBounds(a: BucketHistogram, b: BucketHistogram): boolean {
    return a.bounds.length === b.bounds.length && a.bounds.every((bound, i) => bound === b.bounds[i]);
}

function monotonic(counts: readonly number[]): number[] {
    const out: number[] = [];
    let high = 0;
    for (const count of counts) {
        high = Math.max(high, count);
        out.push(high);
    }
    return out;
}
