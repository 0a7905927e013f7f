import {Histogram} from "./histogram.js";
import type {HistogramView} from "../../../protocol/statsView.js";

/**
 * A histogram whose bounds are only known later (prompt/generation lengths use buckets up to the
 * model's maximum length, known once the engine is ready). Values observed before then are kept
 * (at most `maxPending`, the oldest dropped) and replayed when the bounds are set. The bounds are
 * set once; later calls are ignored, so buckets never change under a running histogram.
 */
export class DeferredHistogram {
    private histogram: Histogram | undefined;
    private pending: number[] = [];

    constructor(private readonly maxPending = 10_000) {}

    setBounds(bounds: readonly number[]): void {
        if (this.histogram !== undefined)
            return;
        this.histogram = new Histogram(bounds);
        for (const value of this.pending)
            this.histogram.observe(value);
        this.pending = [];
    }

    observe(value: number): void {
        if (this.histogram !== undefined) {
            this.histogram.observe(value);
            return;
        }
        this.pending.push(value);
        if (this.pending.length > this.maxPending)
            this.pending.shift();
    }

    /** Before the bounds are known: no bounds, every pending value counted in the overflow bucket. */
    view(): HistogramView {
        if (this.histogram !== undefined)
            return this.histogram.view();
        return {bounds: [], counts: [this.pending.length], sum: this.pending.reduce((a, b) => a + b, 0), count: this.pending.length};
    }
}
