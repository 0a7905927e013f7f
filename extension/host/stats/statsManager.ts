/**
 * StatsManager: the host's single source of truth for serving stats. It observes an EngineClient
 * (`client.observe(manager)`): one `onOutputs(step)` per engine step — the requests' lifecycles and
 * vLLM's iteration stats, built once by the client's OutputProcessor — plus stats-channel snapshots
 * and engine state. It keeps the request ledger (the same lifecycle objects the client builds),
 * derives vLLM V1's metrics, and serves views (snapshot + throttled deltas) and stat loggers
 * (`record` once per step, `log` with the gauges once per tick).
 *
 * Recording decisions (vLLM V1's, where it has one):
 * - TTFT and ITL are recorded as tokens arrive (in the step that brought them), whatever the request's final reason.
 * - At the finish, requests of EVERY reason (stop, length, abort, error — including those failed by
 *   the host when the engine died) are recorded: e2e, queue, prefill, decode, inference, TPOT, prompt
 *   and generation lengths. An interval is recorded only when both its ends exist (vLLM would record
 *   a meaningless value from a zero timestamp); TPOT only when ≥ 2 tokens were generated (vLLM records 0).
 * - Prompt tokens count when the request's prefill is done (its first tokens arrive), as vLLM counts
 *   them; generation tokens as they arrive.
 * - Prefix cache (vLLM's PrefixCacheStats): a request's lookup counts when it is first scheduled — its
 *   prompt tokens queried, its cached tokens hit; the hit rate gauge is over the lookups of the last
 *   `prefixCacheWindowRequests` requests (vLLM's CachingMetrics), not over time.
 * - Per client label (ClientStatsTable): the ledger and the finished requests' final token counts,
 *   and each client's own TTFTs and ITLs (ITL samples carry their request's label in the iteration stats).
 * - Active periods (ActivityPeriods): from a request arriving with none in flight to the last one in
 *   flight finishing; the last that ended, with its average rates, is the view's `lastActive`, so an
 *   idle view can say how fast the last work went.
 */
import {ActivityPeriods} from "./activityPeriods.js";
import {quantileOfSorted} from "./percentiles.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import type {TargetView} from "../../../protocol/targetView.js";
import type {
    BenchTotals, EngineStateName, HistogramMetric, RequestLedgerView, StatsCounters, StatsGauges, StatsSnapshotView,
    TimeSeriesPoint
} from "../../../protocol/statsView.js";
import type {EngineClientState, EngineObserver, RejectedMessage} from "../engineClient/engineObserver.js";
import type {EngineStep} from "../engineClient/engineStep.js";
import type {EngineExit} from "../engineClient/engineTransport.js";
import type {ReceivedSnapshot} from "../engineClient/statsChannelServer.js";
import {CachingMetrics} from "./cachingMetrics.js";
import {ClientStatsTable, type ClientRow} from "./clientStats.js";
import {DeltaPublisher, type StatsListener, type SubscribeOptions, type ViewScalars} from "./deltaPublisher.js";
import {EngineStateTracker} from "./engineStateTracker.js";
import type {StatLogger} from "./loggers/statLogger.js";
import {MetricStore} from "./metricStore.js";
import {QuietMoments} from "./quietMoments.js";
import {RingBuffer} from "./ringBuffer.js";
import {SlidingWindowSum} from "./slidingWindow.js";
import {resolveStatsManagerOptions, type ResolvedStatsManagerOptions, type StatsManagerOptions} from "./statsManagerOptions.js";

/**
 * A request in the ledger: the client's lifecycle object, with the manager's bookkeeping for deltas,
 * the row of the per-client table it counts in, and whether its TTFT has been recorded there.
 */
type LedgerEntry = {readonly serial: number, version: number, readonly lifecycle: RequestLifecycle, client: ClientRow, ttftSeen: boolean};

type Totals = {
    arrived: number,
    byReason: RequestLedgerView["byReason"],
    promptTokens: number,
    generationTokens: number,
    finishedPromptTokens: number,
    finishedGenerationTokens: number,
    preemptions: number,
    prefixCacheQueries: number,
    prefixCacheHits: number,
    externalPrefixCacheQueries: number,
    externalPrefixCacheHits: number,
    rejectedMessages: number,
    ignoredEvents: number
};

const emptyTotals = (): Totals => ({
    arrived: 0, byReason: {stop: 0, length: 0, abort: 0, error: 0}, promptTokens: 0, generationTokens: 0,
    finishedPromptTokens: 0, finishedGenerationTokens: 0, preemptions: 0, prefixCacheQueries: 0, prefixCacheHits: 0,
    externalPrefixCacheQueries: 0, externalPrefixCacheHits: 0, rejectedMessages: 0, ignoredEvents: 0
});

export class StatsManager implements EngineObserver {
    private options: ResolvedStatsManagerOptions;
    private readonly now: () => number;
    private readonly loggers: StatLogger[] = [];
    private readonly engine: EngineStateTracker;
    private readonly publisher: DeltaPublisher;
    private readonly inFlight = new Map<RequestLifecycle, LedgerEntry>();
    /** The most recent requests by arrival, keyed by serial (ids may be reused once finished). */
    private readonly recent = new Map<number, LedgerEntry>();
    private serial = 0;
    private requestVersion = 0;
    private totals = emptyTotals();
    private metrics: MetricStore;
    private clients: ClientStatsTable;
    private readonly promptTokensWindow: SlidingWindowSum;
    private readonly generationTokensWindow: SlidingWindowSum;
    private readonly finishedWindow: SlidingWindowSum;
    private readonly prefixCacheWindow: CachingMetrics;
    private readonly externalPrefixCacheWindow: CachingMetrics;
    private readonly series: RingBuffer<TimeSeriesPoint>;
    private readonly activity = new ActivityPeriods();
    private maxModelLen: number | undefined;
    private target: TargetView | null = null;
    private resetAt: number;
    private lastSampleAt: number;
    private nextSampleAt: number;
    private timer: NodeJS.Timeout | undefined;
    private disposed = false;
    /** The timer's ticks and `/metrics` renders run right after a step's delivery, not in the middle of one. */
    private readonly quiet: QuietMoments;
    /** A timer's tick waits for its quiet moment (a later timer then adds none). */
    private tickPending = false;

    constructor(options: StatsManagerOptions = {}) {
        this.options = resolveStatsManagerOptions(options);
        this.now = this.options.now;
        this.quiet = new QuietMoments({onError: this.options.onError});
        this.engine = new EngineStateTracker(this.options.stallThresholdMs);
        this.metrics = new MetricStore(this.options.maxWindowValues, this.options.percentileWindowMs);
        this.clients = this.newClientTable();
        this.maxModelLen = this.options.maxModelLen;
        if (this.maxModelLen !== undefined)
            this.metrics.setMaxModelLen(this.maxModelLen);
        this.promptTokensWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.generationTokensWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.finishedWindow = new SlidingWindowSum(this.options.throughputWindowMs);
        this.prefixCacheWindow = new CachingMetrics(this.options.prefixCacheWindowRequests);
        this.externalPrefixCacheWindow = new CachingMetrics(this.options.prefixCacheWindowRequests);
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
        for (const logger of options.loggers ?? [])
            this.addLogger(logger);
        if (this.options.tickIntervalMs > 0) {
            this.timer = setInterval(() => {
                if (this.tickPending)
                    return;
                this.tickPending = true;
                this.quiet.run(() => {
                    this.tickPending = false;
                    this.tick();
                });
            }, this.options.tickIntervalMs);
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
            this.safely(() => logger.recordEngine(info, maxModelLen));
        }
        const gauges = this.engine.gauges(now, this.inFlight.size);
        this.safely(() => logger.log(now, gauges));
    }

    // ---- inputs -------------------------------------------------------------------------------

    /** One engine step (or host-side lifecycle change): the ledger, the metrics, then each logger's `record`. */
    onOutputs(step: EngineStep): void {
        this.quiet.onStep();
        const now = this.now();
        const iteration = step.iteration;
        for (const lifecycle of iteration.arrived)
            this.arrive(lifecycle);
        if (iteration.generationTokens > 0) {
            this.totals.generationTokens += iteration.generationTokens;
            this.generationTokensWindow.add(now, iteration.generationTokens);
        }
        if (iteration.promptTokens > 0) {
            this.totals.promptTokens += iteration.promptTokens;
            this.promptTokensWindow.add(now, iteration.promptTokens);
        }
        this.activity.addTokens(iteration.promptTokens, iteration.generationTokens);
        for (const ttft of iteration.ttftS)
            this.metrics.observe("ttft", ttft, now);
        const {itlS, itlClients} = iteration;
        for (let i = 0; i < itlS.length; i++) {
            this.metrics.observe("itl", itlS[i]!, now);
            const client = itlClients[i];
            if (client !== undefined)
                this.clients.find(client)?.itl.observe(now, itlS[i]!);
        }
        this.totals.preemptions += iteration.preemptions;
        if (iteration.prefixCacheRequests > 0) {
            this.totals.prefixCacheQueries += iteration.prefixCacheQueries;
            this.totals.prefixCacheHits += iteration.prefixCacheHits;
            this.prefixCacheWindow.observe(iteration.prefixCacheRequests, iteration.prefixCacheQueries, iteration.prefixCacheHits);
        }
        if (iteration.externalPrefixCacheRequests > 0) {
            this.totals.externalPrefixCacheQueries += iteration.externalPrefixCacheQueries;
            this.totals.externalPrefixCacheHits += iteration.externalPrefixCacheHits;
            this.externalPrefixCacheWindow.observe(iteration.externalPrefixCacheRequests, iteration.externalPrefixCacheQueries,
                iteration.externalPrefixCacheHits);
        }
        for (const lifecycle of iteration.updated) {
            const entry = this.inFlight.get(lifecycle);
            if (entry === undefined) {
                this.totals.ignoredEvents++;
                continue;
            }
            entry.version = ++this.requestVersion;
            const ttftS = lifecycle.metrics.ttftS;
            if (!entry.ttftSeen && ttftS !== undefined) {
                entry.ttftSeen = true;
                entry.client.ttft.observe(now, ttftS);
            }
        }
        for (const lifecycle of iteration.finished)
            this.finish(lifecycle, now);
        if (step.scheduler !== undefined)
            this.engine.onStep(step.scheduler, now);
        for (const logger of this.loggers)
            this.safely(() => logger.record(step.scheduler, iteration));
    }

    onStatsSnapshot(snapshot: ReceivedSnapshot): void {
        this.engine.onSnapshot(snapshot, this.now());
    }

    onEngineState(state: EngineClientState): void {
        this.engine.onClientState(state);
    }

    onEngineReady(info: EngineInfo): void {
        this.engine.onReady(info);
        if (this.maxModelLen === undefined) {
            this.maxModelLen = info.contextSize;
            this.metrics.setMaxModelLen(info.contextSize);
        }
        // The engine's details and its gauges (VRAM read at load) reach every logger now, not at the next tick:
        // a /metrics scrape right after "ready" must not read vram_used_bytes 0.
        for (const logger of this.loggers)
            this.primeLogger(logger);
    }

    /** The engine is gone (EngineClient has already ended its requests, in an `onOutputs` step before this). */
    onEngineExit(exit?: EngineExit): void {
        this.engine.onExit(exit !== undefined && !(exit.code === 0 && exit.signal === null));
    }

    /** The watched servers' state (TargetMonitor), shown with the numbers; null when the engine is ours. */
    onTarget(view: TargetView | null): void {
        this.target = view;
    }

    onRejected(message?: RejectedMessage): void {
        this.totals.rejectedMessages++;
        const source = message?.source ?? "host";
        for (const logger of this.loggers)
            this.safely(() => logger.recordRejected(source));
    }

    // ---- periodic -----------------------------------------------------------------------------

    /** Resolves right after the next step's delivery, or at once while the engine is idle (quietMoments.ts). */
    async quietMoment(): Promise<void> {
        await this.quiet.next();
    }

    /**
     * Takes a time-series sample when one is due, hands the loggers the current gauges and sends due
     * deltas. Runs on the manager's timer (`tickIntervalMs`) at its next quiet moment, or call it yourself.
     */
    tick(): void {
        if (this.disposed)
            return;
        const now = this.now();
        if (now >= this.nextSampleAt)
            this.sample(now);
        if (this.loggers.length > 0) {
            const gauges = this.engine.gauges(now, this.inFlight.size);
            for (const logger of this.loggers)
                this.safely(() => logger.log(now, gauges));
        }
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
            requests: [...this.recent.values()].map((entry) => copyLifecycle(entry.lifecycle))
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
            prefixCacheQueries: totals.prefixCacheQueries,
            prefixCacheHits: totals.prefixCacheHits,
            externalPrefixCacheQueries: totals.externalPrefixCacheQueries,
            externalPrefixCacheHits: totals.externalPrefixCacheHits,
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
            requestsPerS: this.finishedWindow.ratePerS(now, this.resetAt),
            prefixCacheHitRate: this.prefixCacheWindow.hitRate,
            externalPrefixCacheHitRate: this.externalPrefixCacheWindow.hitRate
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
        this.clients = this.newClientTable();
        for (const entry of this.inFlight.values()) {
            entry.client = this.clients.rowFor(entry.lifecycle.client);
            entry.client.arrive();
        }
        this.promptTokensWindow.clear();
        this.generationTokensWindow.clear();
        this.finishedWindow.clear();
        this.prefixCacheWindow.reset();
        this.externalPrefixCacheWindow.reset();
        this.series.clear();
        this.activity.reset(now, this.inFlight.size > 0);
        for (const [serial, entry] of this.recent)
            if (entry.lifecycle.phase === "finished")
                this.recent.delete(serial);
        this.resetAt = now;
        this.lastSampleAt = now;
        this.nextSampleAt = now + this.options.sampleIntervalMs;
        for (const logger of this.loggers)
            this.safely(() => logger.reset(now));
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
        this.quiet.flush();
        await Promise.all(this.loggers.map(async (logger) => {
            try {
                await logger.dispose();
            } catch (error) {
                this.options.onError(error);
            }
        }));
    }

    // ---- internals ----------------------------------------------------------------------------

    private arrive(lifecycle: RequestLifecycle): void {
        if (this.inFlight.has(lifecycle))
            return;
        const client = this.clients.rowFor(lifecycle.client);
        const entry: LedgerEntry = {serial: this.serial++, version: 0, lifecycle, client, ttftSeen: false};
        client.arrive();
        this.totals.arrived++;
        if (this.inFlight.size === 0)
            this.activity.start(lifecycle.arrival);
        this.inFlight.set(lifecycle, entry);
        this.recent.set(entry.serial, entry);
        if (this.recent.size > this.options.maxRecentRequests)
            this.recent.delete(this.recent.keys().next().value!);
    }

    private finish(lifecycle: RequestLifecycle, now: number): void {
        const entry = this.inFlight.get(lifecycle);
        if (entry === undefined || lifecycle.reason === undefined)
            return;
        this.inFlight.delete(lifecycle);
        entry.client.finish(lifecycle.reason, lifecycle.promptTokens, lifecycle.generatedTokens);
        this.totals.byReason[lifecycle.reason]++;
        this.totals.finishedPromptTokens += lifecycle.promptTokens;
        this.totals.finishedGenerationTokens += lifecycle.generatedTokens;
        this.finishedWindow.add(now, 1);
        this.activity.finishRequest(lifecycle.lastDelivered ?? lifecycle.finished ?? now, this.inFlight.size === 0);
        const metrics = this.metrics;
        const {e2eS, queueS, prefillS, decodeS, inferenceS, tpotS} = lifecycle.metrics;
        if (e2eS !== undefined) metrics.observe("e2e", e2eS, now);
        if (queueS !== undefined) metrics.observe("queue", queueS, now);
        if (prefillS !== undefined) metrics.observe("prefill", prefillS, now);
        if (decodeS !== undefined) metrics.observe("decode", decodeS, now);
        if (inferenceS !== undefined) metrics.observe("inference", inferenceS, now);
        if (tpotS !== undefined) metrics.observe("tpot", tpotS, now);
        metrics.observe("promptTokens", lifecycle.promptTokens, now);
        metrics.observe("generationTokens", lifecycle.generatedTokens, now);
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
            histograms: this.metrics.histogramViews(),
            clients: this.clients.views(now, percentileMaxAgeMs),
            target: this.target === null ? null : structuredClone(this.target),
            lastActive: this.activity.last
        };
    }

    private newClientTable(): ClientStatsTable {
        return new ClientStatsTable(this.options.maxClientWindowValues, this.options.percentileWindowMs);
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

    private requestsSince(cursor: number): RequestLifecycle[] {
        const out: RequestLifecycle[] = [];
        for (const entry of this.recent.values())
            if (entry.version > cursor)
                out.push(copyLifecycle(entry.lifecycle));
        return out;
    }

    private safely(action: () => void): void {
        try {
            action();
        } catch (error) {
            this.options.onError(error);
        }
    }
}

/** A copy safe to hand to views (the client keeps changing the original while the request runs). */
function copyLifecycle(lifecycle: RequestLifecycle): RequestLifecycle {
    return {...lifecycle, preemptions: [...lifecycle.preemptions], metrics: {...lifecycle.metrics}};
}
