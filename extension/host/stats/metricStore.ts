import {buildOneTwoFiveBuckets, requestLatencyBucketsS, tokenLatencyBucketsS, ttftBucketsS} from "./buckets.js";
import {DeferredHistogram} from "./deferredHistogram.js";
import {Histogram} from "./histogram.js";
import {summarize} from "./percentiles.js";
import {histogramMetrics, type HistogramMetric, type HistogramView, type LatencyMetric, type PercentileSummary} from "../../../protocol/statsView.js";
import {TimedValueWindow} from "./timedValueWindow.js";

const latencyBuckets: Record<LatencyMetric, readonly number[]> = {
    ttft: ttftBucketsS,
    itl: tokenLatencyBucketsS,
    tpot: tokenLatencyBucketsS,
    e2e: requestLatencyBucketsS,
    queue: requestLatencyBucketsS,
    prefill: requestLatencyBucketsS,
    decode: requestLatencyBucketsS,
    inference: requestLatencyBucketsS
};

type HistogramLike = {observe(value: number): void, view(): HistogramView};

/**
 * Every per-request metric twice: a cumulative histogram with vLLM's buckets (since start/reset) and
 * the recent values themselves (time window, bounded) for exact percentiles.
 */
export class MetricStore {
    private readonly histograms: Record<HistogramMetric, HistogramLike>;
    private readonly lengthHistograms: DeferredHistogram[];
    private readonly windows: Record<HistogramMetric, TimedValueWindow>;
    private readonly cache = new Map<HistogramMetric, {version: number, first: number, at: number, summary: PercentileSummary}>();

    constructor(windowCapacity: number, readonly windowMs: number) {
        const prompt = new DeferredHistogram();
        const generation = new DeferredHistogram();
        this.lengthHistograms = [prompt, generation];
        this.histograms = {
            ttft: new Histogram(latencyBuckets.ttft), itl: new Histogram(latencyBuckets.itl), tpot: new Histogram(latencyBuckets.tpot),
            e2e: new Histogram(latencyBuckets.e2e), queue: new Histogram(latencyBuckets.queue),
            prefill: new Histogram(latencyBuckets.prefill),
            decode: new Histogram(latencyBuckets.decode), inference: new Histogram(latencyBuckets.inference),
            promptTokens: prompt, generationTokens: generation
        };
        const windows: Partial<Record<HistogramMetric, TimedValueWindow>> = {};
        for (const metric of histogramMetrics)
            windows[metric] = new TimedValueWindow(windowCapacity);
        this.windows = windows as Record<HistogramMetric, TimedValueWindow>;
    }

    /** Sizes the length buckets (1, 2, 5, 10, … ≤ maxModelLen), once. */
    setMaxModelLen(maxModelLen: number): void {
        const bounds = buildOneTwoFiveBuckets(maxModelLen);
        for (const histogram of this.lengthHistograms)
            histogram.setBounds(bounds);
    }

    observe(metric: HistogramMetric, value: number, now: number): void {
        this.histograms[metric].observe(value);
        this.windows[metric].push(now, value);
    }

    /**
     * Exact summaries of each metric's values in the window ending at `now` (cached while unchanged).
     * With `maxAgeMs`, a summary computed less than that long ago is reused even if values arrived
     * since: live views refresh percentiles once per sample instead of on every delta tick, which keeps
     * the host's periodic work small (it sits between the engine's outputs and their delivery).
     */
    percentiles(now: number, maxAgeMs = 0): Record<HistogramMetric, PercentileSummary> {
        const out: Partial<Record<HistogramMetric, PercentileSummary>> = {};
        for (const metric of histogramMetrics) {
            const window = this.windows[metric];
            const cutoff = now - this.windowMs;
            const first = window.firstIndexAfter(cutoff);
            const cached = this.cache.get(metric);
            if (cached !== undefined && ((cached.version === window.version && cached.first === first) || now - cached.at < maxAgeMs)) {
                out[metric] = {...cached.summary};
                continue;
            }
            const summary = summarize(window.since(cutoff));
            this.cache.set(metric, {version: window.version, first, at: now, summary});
            out[metric] = {...summary};
        }
        return out as Record<HistogramMetric, PercentileSummary>;
    }

    histogramViews(): Record<HistogramMetric, HistogramView> {
        const out: Partial<Record<HistogramMetric, HistogramView>> = {};
        for (const metric of histogramMetrics)
            out[metric] = this.histograms[metric].view();
        return out as Record<HistogramMetric, HistogramView>;
    }

    /** Values recorded strictly after `t` (still held). */
    valuesSince(metric: HistogramMetric, t: number): Float64Array {
        return this.windows[metric].since(t);
    }
}
