import type {HistogramView} from "../../../protocol/statsView.js";

/**
 * A cumulative histogram with fixed upper bounds, Prometheus semantics: a value goes into the first
 * bucket whose bound is >= the value, or into the overflow (+Inf) bucket.
 */
export class Histogram {
    readonly bounds: readonly number[];
    /** Per-bucket (not cumulative) counts; the last entry is the +Inf overflow. */
    private readonly counts: number[];
    private total = 0;
    private sumOfValues = 0;

    constructor(bounds: readonly number[]) {
        for (let i = 1; i < bounds.length; i++)
            if (!(bounds[i]! > bounds[i - 1]!))
                throw new RangeError(`histogram bounds must increase: ${bounds.join(", ")}`);
        this.bounds = [...bounds];
        this.counts = new Array<number>(bounds.length + 1).fill(0);
    }

    get count(): number {
        return this.total;
    }

    observe(value: number): void {
        this.counts[bucketIndex(this.bounds, value)]!++;
        this.total++;
        this.sumOfValues += value;
    }

    view(): HistogramView {
        return {bounds: [...this.bounds], counts: [...this.counts], sum: this.sumOfValues, count: this.total};
    }
}

/** Index of the first bound >= value (binary search), or `bounds.length` for the overflow bucket. */
export function bucketIndex(bounds: readonly number[], value: number): number {
    let lo = 0;
    let hi = bounds.length;
    while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (value <= bounds[mid]!)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
