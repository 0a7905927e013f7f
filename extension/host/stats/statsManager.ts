/**
 * StatsManager: the host's single source of truth for serving stats. It consumes the engine's
 * lifecycle events, step stats and stats-channel snapshots (plain methods, so tests feed synthetic
 * streams; `attachToEngineClient` wires a real EngineClient), derives vLLM V1's metrics, and serves
 * views (snapshot + throttled deltas) and stat loggers (LoggingStatLogger, PrometheusStatLogger, …).
 *
 * Recording decisions (vLLM V1's, where it has one):
 * - TTFT and ITL are recorded as tokens arrive, for every request, whatever its final reason.
 * - At the finish, requests of EVERY reason (stop, length, abort, error — including those failed by
 *   the host when the engine died) are recorded: e2e, queue, prefill, decode, inference, TPOT, prompt
 *   and generation lengths. An interval is recorded only when both its ends exist (vLLM would record
 *   a meaningless value from a zero timestamp); TPOT only when ≥ 2 tokens were generated (vLLM records 0).
 * - Prompt tokens count when the request's prefill is done (its first tokens arrive), as vLLM counts
 *   them; generation tokens as they arrive.
 */
import type {EngineInfo, StepStats} from "../../../protocol/engineMessages.js";
import type {EngineClientState, RejectedMessage} from "../engineClient/engineClient.js";
import type {EngineExit} from "../engineClient/engineTransport.js";
import type {HostRequestEvent} from "../engineClient/hostRequestEvents.js";
import type {ReceivedSnapshot} from "../engineClient/statsChannelServer.js";
import {DeltaPublisher, type StatsListener, type SubscribeOptions, type ViewScalars} from "./deltaPublisher.js";
import {EngineStateTracker} from "./engineStateTracker.js";
import type {StatLogger, StatUpdate} from "./loggers/statLogger.js";
import {MetricStore} from "./metricStore.js";
import {quantileOfSorted} from "./percentiles.js";
import {RequestTracker, type FinishInput} from "./requestTracker.js";
import {RingBuffer} from "./ringBuffer.js";
import {SlidingWindowSum} from "./slidingWindow.js";
import {resolveStatsManagerOptions, type ResolvedStatsManagerOptions, type StatsManagerOptions} from "./statsManagerOptions.js";
import type {
    BenchTotals, EngineStateName, HistogramMetric, RequestLedgerView, RequestRecord, StatsCounters, StatsGauges,
    StatsSnapshotView, TimeSeriesPoint
} from "../../../protocol/statsView.js";

type Totals = {
    arrived: number,
    byReason: RequestLedgerView["byReason"],
    promptTokens: number,
    generationTokens: number,
    finishedPromptTokens: number,
    finishedGenerationTokens: number,
    preemptions: number,
    rejectedMessages: number,
    ignoredEvents: number
};

const emptyTotals = (): Totals => ({
    arrived: 0, byReason: {stop: 0, length: 0, abort: 0, error: 0}, promptTokens: 0, generationTokens: 0,
    finishedPromptTokens: 0, finishedGenerationTokens: 0, preemptions: 0, rejectedMessages: 0, ignoredEvents: 0
});

export class StatsManager {
    private options: ResolvedStatsManagerOptions;
    private readonly now: () => number;
    private readonly loggers: StatLogger[] = [];
    private readonly engine: EngineStateTracker;
    private readonly publisher: DeltaPublisher;
    private readonly inFlight = new Map<string, RequestTracker>();
    /** The most recent requests by arrival, keyed by serial (ids may be reused once finished). */
    private readonly recent = new Map<number, RequestTracker>();
    private serial = 0;
    private requestVersion = 0;
    private totals = emptyTotals();
    private metrics: MetricStore;
    private readonly promptTokensWindow: SlidingWindowSum;
    private readonly generationTokensWindow: SlidingWindowSum;
    private readonly finishedWindow: SlidingWindowSum;
    private readonly series: RingBuffer<TimeSeriesPoint>;
    private maxModelLen: number | undefined;
    private resetAt: number;
    private lastSampleAt: number;
    private nextSampleAt: number;
    private lastState: EngineStateName;
    private timer: NodeJS.Timeout | undefined;
    private disposed = false;

    constructor(options: StatsManagerOptions = {}) {
        this.options = resolveStatsManagerOptions(options);
        this.now = this.options.now;
        this.engine = new EngineStateTracker(this.options.stallThresholdMs);
        this.metrics = new MetricStore(this.options.maxWindowValues, this.options.percentileWindowMs);
        this.maxModelLen = this.options.maxModelLen;
        if (this.maxModelLen !== undefined)
            this.metrics.setMaxModelLen(this.maxModelLen);
        this.promptTokensWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.generationTokensWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.finishedWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.series = new RingBuffer(this.options.maxTimeSeriesPoints);
        this.publisher = new DeltaPublisher({
            scalars: (now) => this.scalars(now, this.options.sampleIntervalMs),
            seriesCursor: () => this.series.totalPushed,
            seriesSince: (cursor) => this.series.since(cursor),
            requestCursor: () => this.requestVersion,
            requestsSince: (cursor) => this.requestsSince(cursor)
        }, this.options.onError);
        const now = this.now();
        this.resetAt = now;
        this.lastSampleAt = now;
        this.nextSampleAt = now + this.options.sampleIntervalMs;
        this.lastState = this.engine.state(now, 0);
        for (const logger of options.loggers ?? [])
            this.addLogger(logger);
        if (this.options.tickIntervalMs > 0) {
            this.timer = setInterval(() => this.tick(), this.options.tickIntervalMs);
            this.timer.unref();
        }
    }

    /** Changes the stall threshold while running (a setting read live). */
    setStallThresholdMs(ms: number): void {
        this.options = resolveStatsManagerOptions({...this.options, stallThresholdMs: ms});
        this.engine.stallThresholdMs = ms;
    }

    /** Adds a stat logger; it gets the current engine info and gauges right away (`primeLogger`). */
    addLogger(logger: StatLogger): void {
        this.loggers.push(logger);
        this.primeLogger(logger);
    }

    /**
     * Tells a logger what it missed by arriving late: the engine info (if an engine is ready — backend,
     * model name, length buckets) and the current gauges. `addLogger` does this; call it yourself for a
     * logger put behind a wrapper that is already registered (e.g. a swappable slot).
     */
    primeLogger(logger: StatLogger): void {
        const now = this.now();
        const info = this.engine.info;
        if (info !== undefined && this.maxModelLen !== undefined) {
            const maxModelLen = this.maxModelLen;
            this.safely(() => logger.record({type: "engine", t: now, info, maxModelLen}));
        }
        const gauges = this.engine.gauges(now, this.inFlight.size);
        this.safely(() => logger.record({type: "gauges", t: now, gauges}));
    }

    // ---- inputs -------------------------------------------------------------------------------

    onRequestEvent(event: HostRequestEvent): void {
        const now = this.now();
        if (event.kind === "arrival") {
            if (this.inFlight.has(event.id)) {
                this.totals.ignoredEvents++;
                return;
            }
            const tracker = new RequestTracker(this.serial++, event);
            this.totals.arrived++;
            this.inFlight.set(event.id, tracker);
            this.recent.set(tracker.serial, tracker);
            if (this.recent.size > this.options.maxRecentRequests)
                this.recent.delete(this.recent.keys().next().value!);
            this.touch(tracker);
            return;
        }
        const tracker = this.inFlight.get(event.id);
        if (tracker === undefined) {
            this.totals.ignoredEvents++;
            return;
        }
        switch (event.kind) {
            case "inputProcessed": tracker.inputProcessed(event.t, event.promptTokens); break;
            case "queued": tracker.queued(event.t); break;
            case "scheduled": tracker.scheduled(event.t); break;
            case "preempted":
                tracker.preempted(event.t);
                this.totals.preemptions++;
                this.toLoggers({type: "preempted", t: now, requestId: event.id});
                break;
            case "tokens": this.onTokens(tracker, event.times, event.receivedAt, now); break;
            case "finished":
                this.finish(tracker, {t: event.t, receivedAt: event.receivedAt, reason: event.reason, promptTokens: event.promptTokens,
                    generatedTokens: event.generatedTokens, ...(event.error !== undefined ? {error: event.error} : {})}, now);
                break;
        }
        this.touch(tracker);
        this.checkState(now);
    }

    onStep(step: StepStats): void {
        const now = this.now();
        this.engine.onStep(step, now);
        if (step.stepTokens > 0)
            this.toLoggers({type: "step", t: now, stepTokens: step.stepTokens});
        this.gaugesToLoggers(now);
        this.checkState(now);
    }

    onStatsSnapshot(snapshot: ReceivedSnapshot): void {
        const now = this.now();
        if (!this.engine.onSnapshot(snapshot, now))
            return;
        this.gaugesToLoggers(now);
        this.checkState(now);
    }

    onEngineState(state: EngineClientState): void {
        const now = this.now();
        this.engine.onClientState(state);
        this.gaugesToLoggers(now);
        this.checkState(now);
    }

    onEngineReady(info: EngineInfo): void {
        const now = this.now();
        this.engine.onReady(info);
        if (this.maxModelLen === undefined) {
            this.maxModelLen = info.contextSize;
            this.metrics.setMaxModelLen(info.contextSize);
        }
        this.toLoggers({type: "engine", t: now, info, maxModelLen: this.maxModelLen});
        this.gaugesToLoggers(now);
        this.checkState(now);
    }

    /**
     * The engine is gone. EngineClient has already ended its requests with `error`; any still in
     * flight here (another client, or events lost) are ended the same way, so the ledger balances.
     */
    onEngineExit(exit?: EngineExit): void {
        const now = this.now();
        const why = exit === undefined ? "engine exited" : `engine exited (${exit.description})`;
        for (const tracker of [...this.inFlight.values()]) {
            this.finish(tracker, {t: now, receivedAt: now, reason: "error", promptTokens: tracker.record.promptTokens,
                generatedTokens: tracker.record.generatedTokens, error: why}, now);
            this.touch(tracker);
        }
        this.engine.onExit(exit !== undefined && !(exit.code === 0 && exit.signal === null));
        this.gaugesToLoggers(now);
        this.checkState(now);
    }

    onRejected(message?: RejectedMessage): void {
        this.totals.rejectedMessages++;
        this.toLoggers({type: "rejected", t: this.now(), source: message?.source ?? "host"});
    }

    // ---- periodic -----------------------------------------------------------------------------

    /**
     * Re-evaluates the engine state, takes a time-series sample when one is due, lets the loggers
     * log and sends due deltas. Runs on the manager's timer (`tickIntervalMs`), or call it yourself.
     */
    tick(): void {
        if (this.disposed)
            return;
        const now = this.now();
        this.checkState(now);
        if (now >= this.nextSampleAt)
            this.sample(now);
        this.gaugesToLoggers(now);
        for (const logger of this.loggers)
            this.safely(() => logger.log(now));
        if (this.publisher.size > 0)
            this.publisher.emitDue(now);
    }

    // ---- views --------------------------------------------------------------------------------

    get state(): EngineStateName {
        return this.engine.state(this.now(), this.inFlight.size);
    }

    get engineInfo(): EngineInfo | undefined {
        return this.engine.info;
    }

    snapshot(): StatsSnapshotView {
        const now = this.now();
        return {
            t: now,
            config: {
                sampleIntervalMs: this.options.sampleIntervalMs, throughputWindowMs: this.options.throughputWindowMs,
                percentileWindowMs: this.options.percentileWindowMs, stallThresholdMs: this.options.stallThresholdMs,
                maxRecentRequests: this.options.maxRecentRequests
            },
            ...this.scalars(now),
            timeSeries: this.series.toArray(),
            requests: [...this.recent.values()].map((tracker) => tracker.copy())
        };
    }

    /**
     * Deltas (what changed) at most `maxHz` times a second, from the state at the time of this call:
     * take `snapshot()` in the same synchronous turn. Returns the unsubscribe function.
     */
    subscribe(listener: StatsListener, options: SubscribeOptions = {}): () => void {
        return this.publisher.subscribe(listener, options, this.now());
    }

    get subscriberCount(): number {
        return this.publisher.size;
    }

    counters(): StatsCounters {
        const totals = this.totals;
        return {
            promptTokens: totals.promptTokens,
            generationTokens: totals.generationTokens,
            requests: this.ledger(),
            preemptions: totals.preemptions,
            rejectedMessages: totals.rejectedMessages,
            ignoredEvents: totals.ignoredEvents
        };
    }

    gauges(now = this.now()): StatsGauges {
        const engine = this.engine;
        return {
            running: engine.running,
            waiting: engine.waiting,
            kvUsedTokens: engine.kvUsedTokens,
            kvCapacityTokens: engine.kvCapacityTokens,
            kvCacheUsage: engine.kvCacheUsage,
            vramUsedBytes: engine.vramUsedBytes,
            vramTotalBytes: engine.vramTotalBytes,
            msSinceLastStep: engine.msSinceLastStep(now),
            promptTokensPerS: this.promptTokensWindow.ratePerS(now, this.resetAt),
            generationTokensPerS: this.generationTokensWindow.ratePerS(now, this.resetAt),
            requestsPerS: this.finishedWindow.ratePerS(now, this.resetAt)
        };
    }

    /** The values in the percentile window (as recorded, oldest first), e.g. every ITL for a benchmark. */
    windowValues(metric: HistogramMetric): number[] {
        return Array.from(this.metrics.valuesSince(metric, this.now() - this.options.percentileWindowMs));
    }

    /** Totals for a benchmark to compare with its own client-side counts. */
    benchTotals(): BenchTotals {
        const totals = this.totals;
        return {
            requests: this.ledger(),
            promptTokens: totals.promptTokens,
            generationTokens: totals.generationTokens,
            finishedPromptTokens: totals.finishedPromptTokens,
            finishedGenerationTokens: totals.finishedGenerationTokens
        };
    }

    /**
     * Clears counters, histograms, windows, time series and finished requests. Requests still in
     * flight stay tracked (they count as arrived again, so the ledger still balances); the engine's
     * gauges and info stay. Subscribers get `{reset: snapshot}`; loggers a `reset` update.
     */
    reset(): void {
        const now = this.now();
        this.totals = emptyTotals();
        this.totals.arrived = this.inFlight.size;
        this.metrics = new MetricStore(this.options.maxWindowValues, this.options.percentileWindowMs);
        if (this.maxModelLen !== undefined)
            this.metrics.setMaxModelLen(this.maxModelLen);
        this.promptTokensWindow.clear();
        this.generationTokensWindow.clear();
        this.finishedWindow.clear();
        this.series.clear();
        for (const [serial, tracker] of this.recent)
            if (tracker.record.phase === "finished")
                this.recent.delete(serial);
        this.resetAt = now;
        this.lastSampleAt = now;
        this.nextSampleAt = now + this.options.sampleIntervalMs;
        this.toLoggers({type: "reset", t: now});
        if (this.publisher.size > 0)
            this.publisher.emitReset(this.snapshot(), now);
    }

    /** Stops the timer and disposes the loggers. */
    async dispose(): Promise<void> {
        if (this.disposed)
            return;
        this.disposed = true;
        if (this.timer !== undefined)
            clearInterval(this.timer);
        await Promise.all(this.loggers.map(async (logger) => {
            try {
                await logger.dispose();
            } catch (error) {
                this.options.onError(error);
            }
        }));
    }

    // ---- internals ----------------------------------------------------------------------------

    private onTokens(tracker: RequestTracker, times: readonly number[], receivedAt: number, now: number): void {
        const outcome = tracker.tokens(times, receivedAt);
        if (outcome.count === 0)
            return;
        this.totals.generationTokens += outcome.count;
        this.generationTokensWindow.add(now, outcome.count);
        if (outcome.ttftS !== undefined) {
            this.metrics.observe("ttft", outcome.ttftS, now);
            this.totals.promptTokens += outcome.promptTokens;
            this.promptTokensWindow.add(now, outcome.promptTokens);
        }
        for (const itl of outcome.itlS)
            this.metrics.observe("itl", itl, now);
        this.toLoggers({
            type: "tokens", t: now, requestId: tracker.record.id, promptTokens: outcome.promptTokens, generationTokens: outcome.count,
            ...(outcome.ttftS !== undefined ? {ttftS: outcome.ttftS} : {}), itlS: outcome.itlS
        });
    }

    private finish(tracker: RequestTracker, end: FinishInput, now: number): void {
        this.inFlight.delete(tracker.record.id);
        const stats = tracker.finish(end);
        this.totals.byReason[end.reason]++;
        this.totals.finishedPromptTokens += stats.promptTokens;
        this.totals.finishedGenerationTokens += stats.generationTokens;
        this.finishedWindow.add(now, 1);
        const metrics = this.metrics;
        metrics.observe("e2e", stats.e2eS, now);
        if (stats.queueS !== undefined) metrics.observe("queue", stats.queueS, now);
        if (stats.prefillS !== undefined) metrics.observe("prefill", stats.prefillS, now);
        if (stats.decodeS !== undefined) metrics.observe("decode", stats.decodeS, now);
        if (stats.inferenceS !== undefined) metrics.observe("inference", stats.inferenceS, now);
        if (stats.tpotS !== undefined) metrics.observe("tpot", stats.tpotS, now);
        metrics.observe("promptTokens", stats.promptTokens, now);
        metrics.observe("generationTokens", stats.generationTokens, now);
        this.toLoggers({type: "finished", t: now, request: stats});
    }

    private ledger(): RequestLedgerView {
        const byReason = this.totals.byReason;
        return {
            arrived: this.totals.arrived,
            inFlight: this.inFlight.size,
            completed: byReason.stop + byReason.length,
            failed: byReason.error,
            aborted: byReason.abort,
            byReason: {...byReason}
        };
    }

    /** `percentileMaxAgeMs`: see MetricStore.percentiles (deltas reuse summaries up to a sample old). */
    private scalars(now: number, percentileMaxAgeMs = 0): ViewScalars {
        return {
            engine: this.engine.info === undefined ? null : structuredClone(this.engine.info),
            state: this.engine.state(now, this.inFlight.size),
            counters: this.counters(),
            gauges: this.gauges(now),
            percentiles: this.metrics.percentiles(now, percentileMaxAgeMs),
            histograms: this.metrics.histogramViews()
        };
    }

    private sample(now: number): void {
        const since = this.lastSampleAt;
        const ttft = Float64Array.from(this.metrics.valuesSince("ttft", since)).sort();
        const itl = Float64Array.from(this.metrics.valuesSince("itl", since)).sort();
        const engine = this.engine;
        this.series.push({
            t: now,
            promptTokensPerS: this.promptTokensWindow.ratePerS(now, this.resetAt),
            generationTokensPerS: this.generationTokensWindow.ratePerS(now, this.resetAt),
            requestsPerS: this.finishedWindow.ratePerS(now, this.resetAt),
            ttftP50S: quantileOfSorted(ttft, 0.5),
            ttftP99S: quantileOfSorted(ttft, 0.99),
            itlP50S: quantileOfSorted(itl, 0.5),
            itlP99S: quantileOfSorted(itl, 0.99),
            running: engine.running,
            waiting: engine.waiting,
            kvCacheUsage: engine.kvCacheUsage,
            vramUsedBytes: engine.vramUsedBytes
        });
        this.lastSampleAt = now;
        while (this.nextSampleAt <= now)
            this.nextSampleAt += this.options.sampleIntervalMs;
    }

    private requestsSince(cursor: number): RequestRecord[] {
        const out: RequestRecord[] = [];
        for (const tracker of this.recent.values())
            if (tracker.version > cursor)
                out.push(tracker.copy());
        return out;
    }

    private touch(tracker: RequestTracker): void {
        tracker.version = ++this.requestVersion;
    }

    /** Tells the loggers when the engine state changed (e.g. became stalled). */
    private checkState(now: number): void {
        const state = this.engine.state(now, this.inFlight.size);
        if (state === this.lastState)
            return;
        this.lastState = state;
        this.gaugesToLoggers(now);
    }

    private gaugesToLoggers(now: number): void {
        if (this.loggers.length > 0)
            this.toLoggers({type: "gauges", t: now, gauges: this.engine.gauges(now, this.inFlight.size)});
    }

    private toLoggers(update: StatUpdate): void {
        for (const logger of this.loggers)
            this.safely(() => logger.record(update));
    }

    private safely(action: () => void): void {
        try {
            action();
        } catch (error) {
            this.options.onError(error);
        }
    }
}
