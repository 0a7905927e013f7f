/**
 * StatsManager on synthetic event streams with known timestamps and a fake clock: every derived
 * number is checked exactly (vLLM V1 definitions), plus the ledger invariant, stall detection,
 * delta throttling, the recent-request bound and the EngineClient wiring.
 */
import assert from "node:assert/strict";
import {describe, mock, test} from "node:test";
import type {FinishReason, StepStats} from "../../protocol/engineMessages.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import type {ReceivedSnapshot} from "../../extension/host/engineClient/statsChannelServer.js";
import type {IterationStats, SchedulerStats} from "../../extension/host/engineClient/engineStep.js";
import type {EngineGaugeValues, StatLogger} from "../../extension/host/stats/loggers/statLogger.js";
import {MetricStore} from "../../extension/host/stats/metricStore.js";
import {checkDelta, checkSnapshotView} from "../../protocol/statsViewValidation.js";
import type {TargetView} from "../../protocol/targetView.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import type {StatsManagerOptions} from "../../extension/host/stats/statsManagerOptions.js";
import {StatsOptionsError} from "../../extension/host/stats/statsManagerOptions.js";
import {maxClients, type ClientStatsView, type StatsDelta, type StatsSnapshotView} from "../../protocol/statsView.js";
import {engineInfo} from "../helpers/engineInfoFixture.js";
import {StepFeeder, type HostEvent} from "../helpers/stepFeeder.js";

const T0 = 1_700_000_000_000;

const ttftBounds = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const tokenLatencyBounds = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const requestBounds = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
const lengthBounds2048 = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000];


/** A StatsManager on a fake clock, no timer (tests call tick()). */
function setup(options: StatsManagerOptions = {}): {manager: StatsManager, feed: StepFeeder, clock: {now: number}, at: (t: number) => void} {
    const clock = {now: T0};
    const manager = new StatsManager({now: () => clock.now, tickIntervalMs: 0, ...options});
    return {manager, feed: new StepFeeder(manager), clock, at: (t: number) => {
        clock.now = t;
    }};
}

/** Per-bucket counts with one value in each listed bucket index. */
function countsWith(bounds: number[], indexes: number[]): number[] {
    const counts = new Array<number>(bounds.length + 1).fill(0);
    for (const index of indexes)
        counts[index]!++;
    return counts;
}

function step(overrides: Partial<StepStats> = {}): StepStats {
    return {t: T0, running: 0, waiting: 0, stepTokens: 0, kvUsedTokens: 0, kvCapacityTokens: 2048, ...overrides};
}

function snapshotMsg(overrides: Partial<ReceivedSnapshot> = {}): ReceivedSnapshot {
    return {
        type: "snapshot", seq: 1, pid: 4242, t: T0, running: 0, waiting: 0, promptTokensTotal: 0, generationTokensTotal: 0,
        stepsTotal: 0, msSinceLastStep: 0, kvUsedTokens: 0, kvCapacityTokens: 2048, vramUsedBytes: 0, vramTotalBytes: 0,
        rssBytes: 0, receivedAt: T0, ...overrides
    };
}

const arrival = (id: string, t: number, maxTokens = 16): HostEvent => ({kind: "arrival", id, t, priority: 0, maxTokens});
const finished = (id: string, t: number, reason: FinishReason, promptTokens: number, generatedTokens: number, receivedAt = t): HostEvent =>
    ({kind: "finished", id, t, reason, promptTokens, generatedTokens, receivedAt});

/** arrived = completed + failed + aborted + inFlight, and the same as the counts by reason. */
function assertLedger(manager: StatsManager): void {
    const {requests} = manager.snapshot().counters;
    const {byReason} = requests;
    assert.equal(requests.completed, byReason.stop + byReason.length);
    assert.equal(requests.failed, byReason.error);
    assert.equal(requests.aborted, byReason.abort);
    assert.equal(requests.arrived, requests.completed + requests.failed + requests.aborted + requests.inFlight,
        `ledger broken: ${JSON.stringify(requests)}`);
}

describe("per-request metrics (vLLM V1 definitions)", () => {
    test("TTFT, ITL, TPOT, e2e, queue, prefill, decode, inference, lengths and counters, exactly", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        at(T0);
        feed.send(arrival("a", T0, 16));
        at(T0 + 6);
        feed.send({kind: "inputProcessed", id: "a", t: T0 + 5, promptTokens: 10, receivedAt: T0 + 6});
        feed.send({kind: "queued", id: "a", t: T0 + 6, receivedAt: T0 + 6});
        at(T0 + 107);
        feed.send({kind: "scheduled", id: "a", t: T0 + 106, cachedTokens: 6, receivedAt: T0 + 107});
        at(T0 + 310);
        feed.send({kind: "tokens", id: "a", text: "x", times: [T0 + 306], receivedAt: T0 + 310});
        // prompt tokens count once the prefill is done (first tokens), as vLLM counts them
        assert.equal(manager.counters().promptTokens, 10);
        at(T0 + 430);
        feed.send({kind: "tokens", id: "a", text: "yz", times: [T0 + 356, T0 + 426], receivedAt: T0 + 430});
        at(T0 + 508);
        feed.send({kind: "tokens", id: "a", text: "w", times: [T0 + 506], receivedAt: T0 + 508});
        at(T0 + 510);
        feed.send(finished("a", T0 + 507, "length", 10, 4, T0 + 510));

        const snapshot = manager.snapshot();
        const record = snapshot.requests[0]!;
        assert.deepEqual(record, {
            id: "a", client: "test", phase: "finished", priority: 0, maxTokens: 16, arrival: T0, inputProcessed: T0 + 5, queued: T0 + 6,
            scheduled: T0 + 106, firstToken: T0 + 306, lastToken: T0 + 506, firstDelivered: T0 + 310, finished: T0 + 507,
            lastDelivered: T0 + 510, preemptions: [], reason: "length", promptTokens: 10, cachedTokens: 6, generatedTokens: 4,
            metrics: {ttftS: 0.31, e2eS: 0.51, queueS: 0.1, prefillS: 0.2, decodeS: 0.2, inferenceS: 0.4, tpotS: 0.2 / 3}
        });
        assert.deepEqual(manager.windowValues("itl"), [0.05, 0.07, 0.08]);
        assert.deepEqual(manager.windowValues("ttft"), [0.31]);
        assert.deepEqual(manager.windowValues("tpot"), [0.2 / 3]);
        assert.deepEqual(manager.windowValues("e2e"), [0.51]);

        const h = snapshot.histograms;
        assert.deepEqual(h.ttft, {bounds: ttftBounds, counts: countsWith(ttftBounds, [9]), sum: 0.31, count: 1});
        assert.deepEqual(h.itl.bounds, tokenLatencyBounds);
        assert.deepEqual(h.itl.counts, countsWith(tokenLatencyBounds, [2, 3, 4])); // 0.05 ≤ 0.05, 0.07 ≤ 0.075, 0.08 ≤ 0.1
        assert.equal(h.itl.count, 3);
        assert.deepEqual(h.tpot.counts, countsWith(tokenLatencyBounds, [3])); // 0.0667 ≤ 0.075
        for (const metric of ["e2e", "queue", "prefill", "decode", "inference"] as const) {
            assert.deepEqual(h[metric].bounds, requestBounds);
            assert.equal(h[metric].count, 1);
        }
        assert.deepEqual(h.e2e.counts, countsWith(requestBounds, [2])); // 0.5 < 0.51 ≤ 0.8
        assert.deepEqual(h.queue.counts, countsWith(requestBounds, [0]));
        assert.deepEqual(h.inference.counts, countsWith(requestBounds, [1]));
        assert.deepEqual(h.promptTokens, {bounds: lengthBounds2048, counts: countsWith(lengthBounds2048, [3]), sum: 10, count: 1});
        assert.deepEqual(h.generationTokens, {bounds: lengthBounds2048, counts: countsWith(lengthBounds2048, [2]), sum: 4, count: 1});

        assert.deepEqual(snapshot.counters, {
            promptTokens: 10, generationTokens: 4, preemptions: 0, prefixCacheQueries: 10, prefixCacheHits: 6, externalPrefixCacheQueries: 0,
            externalPrefixCacheHits: 0, rejectedMessages: 0, ignoredEvents: 0, requests: {arrived: 1, inFlight: 0, completed: 1, failed: 0, aborted: 0, byReason: {stop: 0, length: 1, abort: 0, error: 0}}
        });
        assert.equal(snapshot.gauges.prefixCacheHitRate, 0.6);
        assert.deepEqual(manager.benchTotals(), {
            requests: snapshot.counters.requests, promptTokens: 10, generationTokens: 4, finishedPromptTokens: 10, finishedGenerationTokens: 4
        });
        const e2e = snapshot.percentiles.e2e;
        assert.deepEqual(e2e, {count: 1, mean: 0.51, p50: 0.51, p90: 0.51, p99: 0.51, max: 0.51});
    });

    test("preemptions keep the first scheduled time; intervals without both ends are not recorded", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        feed.send(arrival("p", T0));
        feed.send({kind: "inputProcessed", id: "p", t: T0 + 1, promptTokens: 3, receivedAt: T0 + 1});
        feed.send({kind: "queued", id: "p", t: T0 + 2, receivedAt: T0 + 2});
        feed.send({kind: "scheduled", id: "p", t: T0 + 102, cachedTokens: 0, receivedAt: T0 + 102});
        feed.send({kind: "tokens", id: "p", text: "a", times: [T0 + 202], receivedAt: T0 + 203});
        feed.send({kind: "preempted", id: "p", t: T0 + 250, receivedAt: T0 + 250});
        feed.send({kind: "scheduled", id: "p", t: T0 + 700, cachedTokens: 0, receivedAt: T0 + 700});
        feed.send({kind: "tokens", id: "p", text: "b", times: [T0 + 802], receivedAt: T0 + 803});
        at(T0 + 900);
        feed.send(finished("p", T0 + 803, "stop", 3, 2, T0 + 900));
        // an aborted request that never left the queue: only e2e (and lengths) are recorded
        feed.send(arrival("q", T0 + 100));
        feed.send({kind: "queued", id: "q", t: T0 + 101, receivedAt: T0 + 101});
        feed.send(finished("q", T0 + 400, "abort", 5, 0, T0 + 400));

        const [p, q] = manager.snapshot().requests;
        assert.deepEqual(p!.preemptions, [T0 + 250]);
        assert.equal(p!.scheduled, T0 + 102);
        assert.deepEqual(p!.metrics, {ttftS: 0.203, e2eS: 0.9, queueS: 0.1, prefillS: 0.1, decodeS: 0.6, inferenceS: 0.7, tpotS: 0.6});
        assert.deepEqual(q!.metrics, {e2eS: 0.3});
        const counters = manager.counters();
        assert.equal(counters.preemptions, 1);
        assert.equal(counters.promptTokens, 3, "the aborted request never prefilled");
        assert.deepEqual(manager.windowValues("e2e"), [0.9, 0.3]);
        assert.deepEqual(manager.windowValues("queue"), [0.1]);
        assert.deepEqual(manager.windowValues("tpot"), [0.6]);
        assert.deepEqual(manager.windowValues("promptTokens"), [3, 5]);
        assert.deepEqual(manager.benchTotals().finishedPromptTokens, 8);
    });

    test("p50/p90/p99 are exact over the window, and values age out of it", () => {
        const {manager, feed, at} = setup({percentileWindowMs: 60_000});
        manager.onEngineReady(engineInfo());
        // prompt lengths 1..101 → numpy percentiles 51, 91, 100 exactly
        for (let i = 1; i <= 101; i++) {
            feed.send(arrival(`r${i}`, T0));
            feed.send(finished(`r${i}`, T0, "stop", i, 0));
        }
        assert.deepEqual(manager.snapshot().percentiles.promptTokens, {count: 101, mean: 51, p50: 51, p90: 91, p99: 100, max: 101});
        // interpolated: ITL 10, 20, 30, 40, 50 ms
        feed.send(arrival("i", T0));
        feed.send({kind: "tokens", id: "i", text: "", times: [T0, T0 + 10, T0 + 30, T0 + 60, T0 + 100, T0 + 150], receivedAt: T0});
        const itl = manager.snapshot().percentiles.itl;
        assert.equal(itl.count, 5);
        assert.equal(itl.p50, 0.03);
        assert.ok(Math.abs(itl.p90! - 0.046) < 1e-12, String(itl.p90));
        assert.ok(Math.abs(itl.p99! - 0.0496) < 1e-12, String(itl.p99));
        at(T0 + 60_000);
        assert.equal(manager.snapshot().percentiles.promptTokens.count, 0, "all recorded at T0, window (T0, T0+60s]");
        assert.deepEqual(manager.snapshot().percentiles.itl, {count: 0, mean: null, p50: null, p90: null, p99: null, max: null});
        assert.equal(manager.snapshot().histograms.promptTokens.count, 101, "histograms are cumulative");
    });

    test("percentile windows are bounded by maxWindowValues", () => {
        const {manager, feed} = setup({maxWindowValues: 10});
        for (let i = 1; i <= 25; i++) {
            feed.send(arrival(`r${i}`, T0));
            feed.send(finished(`r${i}`, T0 + 1, "stop", i, 0));
        }
        assert.deepEqual(manager.windowValues("promptTokens"), [16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
    });

    test("length histograms observed before the engine is ready are replayed into its buckets", () => {
        const {manager, feed} = setup();
        feed.send(arrival("early", T0));
        feed.send(finished("early", T0, "error", 0, 0));
        assert.deepEqual(manager.snapshot().histograms.promptTokens, {bounds: [], counts: [1], sum: 0, count: 1});
        manager.onEngineReady(engineInfo({contextSize: 100}));
        assert.deepEqual(manager.snapshot().histograms.promptTokens,
            {bounds: [1, 2, 5, 10, 20, 50, 100], counts: [1, 0, 0, 0, 0, 0, 0, 0], sum: 0, count: 1});
    });
});

describe("gauges, throughput and time series", () => {
    test("throughput over the sliding window and time-series points on the fake clock", () => {
        const {manager, feed, at} = setup({sampleIntervalMs: 1000, throughputWindowMs: 5000});
        manager.onEngineReady(engineInfo());
        at(T0 + 500);
        feed.send(arrival("a", T0 + 400));
        feed.send({kind: "inputProcessed", id: "a", t: T0 + 450, promptTokens: 10, receivedAt: T0 + 450});
        at(T0 + 800);
        feed.send({kind: "tokens", id: "a", text: "", times: [T0 + 700, T0 + 780], receivedAt: T0 + 800});
        feed.step(step({t: T0 + 800, running: 1, waiting: 2, stepTokens: 12, kvUsedTokens: 512}));
        at(T0 + 999);
        manager.tick();
        assert.equal(manager.snapshot().timeSeries.length, 0, "no sample before the first interval");
        at(T0 + 1000);
        manager.tick();
        at(T0 + 2000);
        feed.send({kind: "tokens", id: "a", text: "", times: [T0 + 1900, T0 + 1950, T0 + 2000], receivedAt: T0 + 2000});
        feed.send(finished("a", T0 + 2000, "stop", 10, 5, T0 + 2000));
        feed.step(step({t: T0 + 2000, running: 0, waiting: 0, stepTokens: 3, kvUsedTokens: 0}));
        manager.tick();
        at(T0 + 6000);
        manager.tick(); // window (T0+1000, T0+6000]: only the 3 tokens at T0+2000
        at(T0 + 7500);
        manager.tick(); // window (T0+2500, T0+7500]: nothing

        const points = manager.snapshot().timeSeries;
        assert.deepEqual(points, [
            {t: T0 + 1000, promptTokensPerS: 10, generationTokensPerS: 2, requestsPerS: 0, ttftP50S: 0.4, ttftP99S: 0.4,
                itlP50S: 0.08, itlP99S: 0.08, running: 1, waiting: 2, kvCacheUsage: 0.25, vramUsedBytes: 1e9},
            {t: T0 + 2000, promptTokensPerS: 5, generationTokensPerS: 2.5, requestsPerS: 0.5, ttftP50S: null, ttftP99S: null,
                itlP50S: 0.05, itlP99S: quantileOf([1.12, 0.05, 0.05], 0.99), running: 0, waiting: 0,
                kvCacheUsage: 0, vramUsedBytes: 1e9},
            {t: T0 + 6000, promptTokensPerS: 0, generationTokensPerS: 0.6, requestsPerS: 0.2, ttftP50S: null, ttftP99S: null,
                itlP50S: null, itlP99S: null, running: 0, waiting: 0, kvCacheUsage: 0, vramUsedBytes: 1e9},
            {t: T0 + 7500, promptTokensPerS: 0, generationTokensPerS: 0, requestsPerS: 0, ttftP50S: null, ttftP99S: null,
                itlP50S: null, itlP99S: null, running: 0, waiting: 0, kvCacheUsage: 0, vramUsedBytes: 1e9}
        ]);
        const gauges = manager.gauges();
        assert.equal(gauges.generationTokensPerS, 0);
    });

    test("KV-cache usage, VRAM and queue gauges follow the newest of steps and snapshots", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        assert.equal(manager.gauges().vramUsedBytes, 1e9);
        at(T0 + 100);
        feed.step(step({t: T0 + 100, running: 3, waiting: 1, stepTokens: 3, kvUsedTokens: 1536}));
        assert.equal(manager.gauges().kvCacheUsage, 0.75);
        // an older snapshot (taken before that step) does not override the queues
        manager.onStatsSnapshot(snapshotMsg({t: T0 + 50, running: 1, waiting: 0, kvUsedTokens: 10, vramUsedBytes: 2e9, vramTotalBytes: 8e9}));
        let gauges = manager.gauges();
        assert.deepEqual([gauges.running, gauges.waiting, gauges.kvUsedTokens, gauges.vramUsedBytes], [3, 1, 1536, 2e9]);
        manager.onStatsSnapshot(snapshotMsg({seq: 2, t: T0 + 150, running: 2, waiting: 0, kvUsedTokens: 1024, vramUsedBytes: 3e9, vramTotalBytes: 8e9}));
        gauges = manager.gauges();
        assert.deepEqual([gauges.running, gauges.waiting, gauges.kvCacheUsage, gauges.vramUsedBytes, gauges.vramTotalBytes], [2, 0, 0.5, 3e9, 8e9]);
        // another engine's snapshot (wrong pid) is ignored
        manager.onStatsSnapshot(snapshotMsg({seq: 3, pid: 1, t: T0 + 200, running: 9}));
        assert.equal(manager.gauges().running, 2);
    });
});

describe("prefix cache (vLLM's PrefixCacheStats and CachingMetrics)", () => {
    /** A request up to its first schedule: `promptTokens` looked up, `cachedTokens` found. */
    function schedule(feed: StepFeeder, id: string, t: number, promptTokens: number, cachedTokens: number, restoredTokens?: number): void {
        feed.send(arrival(id, t));
        feed.send({kind: "inputProcessed", id, t, promptTokens, receivedAt: t});
        feed.send({kind: "queued", id, t, receivedAt: t});
        feed.send({kind: "scheduled", id, t: t + 1, cachedTokens, ...(restoredTokens !== undefined ? {restoredTokens} : {}), receivedAt: t + 1});
    }

    test("with a prompt cache: restored tokens are external hits (vLLM's KV connector counters), the rest local ones", () => {
        const {manager, feed} = setup({prefixCacheWindowRequests: 2});
        manager.onEngineReady(engineInfo({promptCacheMiB: 64}));
        const view = (): number[] => {
            const {counters, gauges} = manager.snapshot();
            return [counters.prefixCacheQueries, counters.prefixCacheHits, counters.externalPrefixCacheQueries, counters.externalPrefixCacheHits,
                gauges.externalPrefixCacheHitRate];
        };
        schedule(feed, "a", T0, 100, 0, 0);
        const lookup = feed.steps.at(-1)!.iteration;
        assert.deepEqual([lookup.externalPrefixCacheRequests, lookup.externalPrefixCacheQueries, lookup.externalPrefixCacheHits], [1, 100, 0]);
        schedule(feed, "b", T0 + 10, 100, 99, 99);
        assert.deepEqual(view(), [200, 0, 200, 99, 99 / 200], "restored: not a local hit");
        schedule(feed, "c", T0 + 20, 50, 40, 0);
        assert.deepEqual(view(), [250, 40, 250, 99, 99 / 150], "the window holds b and c");
        // the usage and the ledger keep every cached token, restored or not
        const b = manager.snapshot().requests.find((r) => r.id === "b")!;
        assert.deepEqual([b.cachedTokens, b.restoredTokens], [99, 99]);
        assert.equal(manager.snapshot().requests.find((r) => r.id === "c")!.restoredTokens, 0);
        // an engine without a prompt cache sends no restoredTokens: no external lookup
        schedule(feed, "d", T0 + 30, 10, 5);
        assert.deepEqual(view(), [260, 45, 250, 99, 99 / 150]);
        assert.equal(manager.snapshot().requests.find((r) => r.id === "d")!.restoredTokens, undefined);
        manager.reset();
        assert.deepEqual(view(), [0, 0, 0, 0, 0]);
    });

    test("queries and hits in tokens at the first schedule; the hit rate over the last N requests; reset clears both", () => {
        const {manager, feed} = setup({prefixCacheWindowRequests: 2});
        manager.onEngineReady(engineInfo());
        const view = (): [number, number, number] => {
            const {counters, gauges} = manager.snapshot();
            return [counters.prefixCacheQueries, counters.prefixCacheHits, gauges.prefixCacheHitRate];
        };
        assert.deepEqual(view(), [0, 0, 0], "nothing looked up: 0, as vLLM's hit_rate");

        schedule(feed, "a", T0, 100, 0);
        const lookup = feed.steps.at(-1)!.iteration;
        assert.deepEqual([lookup.prefixCacheRequests, lookup.prefixCacheQueries, lookup.prefixCacheHits], [1, 100, 0]);
        assert.deepEqual(view(), [100, 0, 0]);

        schedule(feed, "b", T0 + 10, 100, 99);
        assert.deepEqual(view(), [200, 99, 99 / 200]);
        // preempted and scheduled again: not a new lookup, and the lifecycle keeps its first cachedTokens
        feed.send({kind: "preempted", id: "b", t: T0 + 20, receivedAt: T0 + 20});
        feed.send({kind: "scheduled", id: "b", t: T0 + 30, cachedTokens: 50, receivedAt: T0 + 30});
        assert.equal(feed.steps.at(-1)!.iteration.prefixCacheRequests, 0);
        assert.deepEqual(view(), [200, 99, 99 / 200]);
        assert.equal(manager.snapshot().requests.find((r) => r.id === "b")!.cachedTokens, 99);

        // a request that never reaches a sequence looks nothing up
        feed.send(arrival("never", T0 + 40));
        feed.send({kind: "inputProcessed", id: "never", t: T0 + 40, promptTokens: 30, receivedAt: T0 + 40});
        feed.send(finished("never", T0 + 41, "abort", 30, 0));
        assert.deepEqual(view(), [200, 99, 99 / 200]);
        assert.equal(manager.snapshot().requests.find((r) => r.id === "never")!.cachedTokens, 0);

        // a third request: the window (2 requests) drops a's lookup; the counters keep everything
        schedule(feed, "c", T0 + 50, 50, 40);
        assert.deepEqual(view(), [250, 139, (99 + 40) / (100 + 50)]);

        // two lookups in one step are one window entry; the newest entry stays whole even past the window
        for (const id of ["d", "e"]) {
            feed.send(arrival(id, T0 + 60));
            feed.send({kind: "inputProcessed", id, t: T0 + 60, promptTokens: 20, receivedAt: T0 + 60});
        }
        feed.outputs([
            {kind: "scheduled", id: "d", t: T0 + 61, cachedTokens: 5},
            {kind: "scheduled", id: "e", t: T0 + 61, cachedTokens: 15}
        ], step({t: T0 + 61, running: 2}), T0 + 61);
        const both = feed.steps.at(-1)!.iteration;
        assert.deepEqual([both.prefixCacheRequests, both.prefixCacheQueries, both.prefixCacheHits], [2, 40, 20]);
        assert.deepEqual(view(), [290, 159, 0.5], "only d and e in the window");

        // steps without lookups leave the rate alone (an idle engine keeps its last hit rate)
        feed.step(step({t: T0 + 70}));
        assert.equal(manager.gauges().prefixCacheHitRate, 0.5);

        manager.reset();
        assert.deepEqual(view(), [0, 0, 0]);
        schedule(feed, "f", T0 + 80, 10, 9);
        assert.deepEqual(view(), [10, 9, 0.9]);
    });

    test("prefixCacheWindowRequests must be a positive integer", () => {
        assert.throws(() => new StatsManager({prefixCacheWindowRequests: 0}), StatsOptionsError);
        assert.throws(() => new StatsManager({prefixCacheWindowRequests: 2.5}), StatsOptionsError);
    });
});

/** numpy-style quantile, for expected values in the time-series test. */
function quantileOf(values: number[], q: number): number {
    const sorted = [...values].sort((a, b) => a - b);
    const index = q * (sorted.length - 1);
    const lo = Math.floor(index);
    const hi = Math.ceil(index);
    return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (index - lo);
}

describe("the request ledger", () => {
    test("arrived = completed + failed + aborted + in flight after every event, across a crash and a restart", () => {
        const {manager, feed, at} = setup();
        const push = (event: HostEvent): void => {
            feed.send(event);
            assertLedger(manager);
        };
        manager.onEngineState("loading");
        assert.equal(manager.state, "loading");
        manager.onEngineReady(engineInfo());
        manager.onEngineState("ready");
        assert.equal(manager.state, "idle");
        for (const id of ["a", "b", "c", "d"]) {
            push(arrival(id, T0));
            push({kind: "inputProcessed", id, t: T0 + 1, promptTokens: 4, receivedAt: T0 + 1});
            push({kind: "queued", id, t: T0 + 1, receivedAt: T0 + 1});
        }
        assert.equal(manager.state, "busy", "requests in flight");
        push({kind: "scheduled", id: "a", t: T0 + 2, cachedTokens: 0, receivedAt: T0 + 2});
        push({kind: "tokens", id: "a", text: "t", times: [T0 + 3], receivedAt: T0 + 3});
        push(finished("a", T0 + 4, "stop", 4, 1));
        push(finished("b", T0 + 5, "abort", 4, 0));
        push({kind: "scheduled", id: "c", t: T0 + 6, cachedTokens: 0, receivedAt: T0 + 6});
        push({kind: "tokens", id: "c", text: "t", times: [T0 + 7, T0 + 8], receivedAt: T0 + 9});
        // the engine dies: EngineClient ends c and d with `error` (receivedAt = t), then reports the exit
        at(T0 + 50);
        push(finished("c", T0 + 50, "error", 4, 2));
        push(finished("d", T0 + 50, "error", 4, 0));
        manager.onEngineExit({code: null, signal: "SIGKILL", description: "signal SIGKILL"});
        assertLedger(manager);
        manager.onEngineState("crashed");
        assert.equal(manager.state, "crashed");
        // late or duplicated events for requests already ended are refused by the client, never double counted
        push(finished("c", T0 + 51, "stop", 4, 3));
        push({kind: "tokens", id: "d", text: "late", times: [T0 + 52], receivedAt: T0 + 52});
        let counters = manager.counters();
        assert.deepEqual(counters.requests, {arrived: 4, inFlight: 0, completed: 1, failed: 2, aborted: 1,
            byReason: {stop: 1, length: 0, abort: 1, error: 2}});
        assert.deepEqual(feed.unknownIds, ["c", "d"]);
        assert.equal(counters.ignoredEvents, 0);
        assert.equal(counters.generationTokens, 3);

        // restart: a new engine process; a snapshot from the dead one is ignored
        manager.onEngineState("stopped");
        manager.onEngineState("loading");
        manager.onEngineReady(engineInfo({pid: 5151}));
        manager.onEngineState("ready");
        assert.equal(manager.state, "idle");
        manager.onStatsSnapshot(snapshotMsg({pid: 4242, t: T0 + 60, running: 7}));
        assert.equal(manager.gauges().running, 0);
        push(arrival("e", T0 + 100));
        push({kind: "queued", id: "e", t: T0 + 101, receivedAt: T0 + 101});
        push({kind: "scheduled", id: "e", t: T0 + 102, cachedTokens: 0, receivedAt: T0 + 102});
        push({kind: "tokens", id: "e", text: "t", times: [T0 + 103], receivedAt: T0 + 103});
        push(finished("e", T0 + 104, "length", 4, 1));
        // an id can be reused once its request has finished
        push(arrival("a", T0 + 200));
        assert.equal(manager.snapshot().requests.filter((r) => r.id === "a").length, 2);
        counters = manager.counters();
        assert.deepEqual(counters.requests, {arrived: 6, inFlight: 1, completed: 2, failed: 2, aborted: 1,
            byReason: {stop: 1, length: 1, abort: 1, error: 2}});
        // a duplicate arrival for an id still in flight is refused
        assert.throws(() => push(arrival("a", T0 + 201)), /duplicate request id "a": it is still in flight/);
        assert.equal(manager.counters().requests.arrived, 6);
    });

    test("requests in flight when the engine exits end on the host with `error` (as EngineClient ends them)", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        feed.send(arrival("x", T0));
        feed.send({kind: "inputProcessed", id: "x", t: T0 + 1, promptTokens: 7, receivedAt: T0 + 1});
        at(T0 + 1000);
        feed.endOnHost(["x"], "engine exited (exit code 1)", T0 + 1000);
        manager.onEngineExit({code: 1, signal: null, description: "exit code 1"});
        assertLedger(manager);
        assert.equal(manager.state, "crashed");
        const record = manager.snapshot().requests[0]!;
        assert.equal(record.reason, "error");
        assert.equal(record.error, "engine exited (exit code 1)");
        assert.equal(record.metrics.e2eS, 1);
        assert.equal(record.promptTokens, 7);
        feed.send(finished("x", T0 + 1001, "error", 7, 0));
        assert.deepEqual(feed.unknownIds, ["x"], "a late finish is refused");
        assertLedger(manager);
        assert.equal(manager.counters().requests.failed, 1);
    });

    test("keeps the last 500 requests, but tracks every request in flight", () => {
        const {manager, feed} = setup();
        for (let i = 0; i < 600; i++)
            feed.send(arrival(`r${i}`, T0 + i));
        let snapshot = manager.snapshot();
        assert.equal(snapshot.requests.length, 500);
        assert.equal(snapshot.requests[0]!.id, "r100");
        assert.equal(snapshot.requests[499]!.id, "r599");
        assert.equal(snapshot.counters.requests.inFlight, 600);
        feed.send(finished("r0", T0 + 700, "stop", 1, 0));
        snapshot = manager.snapshot();
        assert.equal(snapshot.counters.requests.inFlight, 599);
        assert.equal(snapshot.counters.requests.completed, 1);
        assertLedger(manager);
    });
});

describe("engine state", () => {
    test("stalled after the threshold without a step while running (host measure), busy again when steps resume", () => {
        const {manager, feed, at} = setup({stallThresholdMs: 1000});
        const states: string[] = [];
        manager.addLogger(recordingLogger((call) => {
            if (call.call === "log" && states.at(-1) !== call.gauges.state)
                states.push(call.gauges.state);
        }));
        manager.onEngineReady(engineInfo());
        manager.tick();
        feed.send(arrival("a", T0));
        at(T0 + 10);
        feed.step(step({t: T0 + 10, running: 1, stepTokens: 5}));
        at(T0 + 1010);
        manager.tick();
        assert.equal(manager.state, "busy", "exactly the threshold is not yet stalled");
        assert.equal(manager.gauges().msSinceLastStep, 1000);
        at(T0 + 1011);
        manager.tick();
        assert.equal(manager.state, "stalled");
        // a step message without tokens (lifecycle events only) is not progress
        feed.step(step({t: T0 + 1011, running: 1, stepTokens: 0}));
        assert.equal(manager.state, "stalled");
        at(T0 + 1500);
        feed.step(step({t: T0 + 1500, running: 1, stepTokens: 1}));
        assert.equal(manager.state, "busy");
        manager.tick();
        feed.send(finished("a", T0 + 1501, "stop", 1, 1));
        feed.step(step({t: T0 + 1501, running: 0, stepTokens: 0}));
        at(T0 + 9000);
        manager.tick();
        assert.equal(manager.state, "idle", "an idle engine is never stalled");
        assert.deepEqual(states, ["stopped", "idle", "busy", "stalled", "busy", "idle"], "the gauges loggers get once per tick");
    });

    test("stalled from the stats channel's msSinceLastStep when its snapshot is newer than the last step", () => {
        const {manager, feed, at} = setup({stallThresholdMs: 1000});
        manager.onEngineReady(engineInfo());
        at(T0);
        // the step's output reached the host late (engine time T0-1200)
        feed.step(step({t: T0 - 1200, running: 1, stepTokens: 4}));
        at(T0 + 10);
        manager.onStatsSnapshot(snapshotMsg({t: T0 + 10, running: 1, msSinceLastStep: 1210, receivedAt: T0 + 10}));
        assert.equal(manager.state, "stalled");
        assert.equal(manager.gauges().msSinceLastStep, 1210);
        at(T0 + 110);
        assert.equal(manager.gauges().msSinceLastStep, 1310, "aged by the time since the snapshot");
        feed.step(step({t: T0 + 100, running: 1, stepTokens: 1}));
        assert.equal(manager.state, "busy");
        assert.equal(manager.gauges().msSinceLastStep, 0);
    });

    test("reaches stalled on its own timer within 1.5 s (real clock, short timers)", async () => {
        const manager = new StatsManager({tickIntervalMs: 20, stallThresholdMs: 100});
        try {
            let stalledAt: number | undefined;
            manager.addLogger(recordingLogger((call) => {
                if (call.call === "log" && call.gauges.state === "stalled")
                    stalledAt ??= performance.now();
            }));
            manager.onEngineReady(engineInfo());
            new StepFeeder(manager).step(step({t: Date.now(), running: 1, stepTokens: 3}));
            const blockedAt = performance.now();
            await new Promise((resolve) => setTimeout(resolve, 250));
            assert.ok(stalledAt !== undefined, "never reported stalled");
            assert.ok(stalledAt - blockedAt < 100 + 150, `stalled after ${stalledAt - blockedAt} ms`);
        } finally {
            await manager.dispose();
        }
    });
});

type LoggerCall =
    | {call: "recordEngine", maxModelLen: number}
    | {call: "record", scheduler: SchedulerStats | undefined, iteration: IterationStats}
    | {call: "recordRejected", source: string}
    | {call: "log", now: number, gauges: EngineGaugeValues}
    | {call: "reset"};

/** A logger that reports every call it gets. */
function recordingLogger(onCall: (call: LoggerCall) => void): StatLogger {
    return {
        recordEngine: (_info, maxModelLen) => onCall({call: "recordEngine", maxModelLen}),
        record: (scheduler, iteration) => onCall({call: "record", scheduler, iteration}),
        recordRejected: (source) => onCall({call: "recordRejected", source}),
        log: (now, gauges) => onCall({call: "log", now, gauges}),
        reset: () => onCall({call: "reset"}),
        dispose: () => {}
    };
}

describe("views: snapshot and deltas", () => {
    test("deltas at most 4 Hz, carrying only what changed, JSON-serializable", () => {
        const {manager, feed, at} = setup({sampleIntervalMs: 1000});
        manager.onEngineReady(engineInfo());
        const deltas: StatsDelta[] = [];
        const before = manager.snapshot();
        const unsubscribe = manager.subscribe((delta) => deltas.push(delta));
        feed.send(arrival("a", T0));
        feed.send({kind: "inputProcessed", id: "a", t: T0, promptTokens: 2, receivedAt: T0});
        feed.send({kind: "queued", id: "a", t: T0, receivedAt: T0});
        feed.send({kind: "scheduled", id: "a", t: T0, cachedTokens: 0, receivedAt: T0});
        for (let t = T0 + 50; t <= T0 + 5000; t += 50) {
            at(t);
            feed.send({kind: "tokens", id: "a", text: "x", times: [t - 1], receivedAt: t});
            feed.step(step({t, running: 1, stepTokens: 1, kvUsedTokens: (t - T0) / 50}));
            manager.tick();
        }
        assert.equal(deltas.length, 20, "5 s at 4 Hz");
        for (let i = 1; i < deltas.length; i++)
            assert.ok(deltas[i]!.t - deltas[i - 1]!.t >= 250, `deltas ${i - 1} and ${i} too close`);
        assert.deepEqual(deltas.map((d) => d.seq), Array.from({length: 20}, (_, i) => i + 1));
        const first = deltas[0]!;
        assert.equal(first.state, "busy");
        assert.equal(first.engine, undefined, "engine info did not change since subscribing");
        assert.deepEqual(first.requests?.map((r) => [r.id, r.phase]), [["a", "running"]]);
        assert.equal(first.gauges?.running, 1);
        assert.equal(first.gauges?.vramUsedBytes, undefined, "unchanged gauges are left out");
        assert.equal(first.counters?.generationTokens, 1);
        assert.equal(first.histograms?.ttft?.count, 1);
        assert.equal(first.histograms?.e2e, undefined);
        // time series: every point exactly once, in order (the one at 5 s is sampled after the last delta)
        const points = deltas.flatMap((d) => d.timeSeries ?? []);
        assert.deepEqual(points.map((p) => p.t), [1, 2, 3, 4].map((s) => T0 + s * 1000));
        for (const delta of deltas)
            assert.deepEqual(JSON.parse(JSON.stringify(delta)), delta);
        assert.equal(before.timeSeries.length, 0);

        // a quiet subscriber at 1 Hz alongside: at most one per second
        const slow: StatsDelta[] = [];
        const unsubscribeSlow = manager.subscribe((delta) => slow.push(delta), {maxHz: 1});
        for (let t = T0 + 5050; t <= T0 + 7000; t += 50) {
            at(t);
            feed.step(step({t, running: 1, stepTokens: 1, kvUsedTokens: (t - T0) / 50}));
            manager.tick();
        }
        assert.equal(slow.length, 2);
        unsubscribe();
        unsubscribeSlow();
        const count = deltas.length;
        at(T0 + 8000);
        feed.step(step({t: T0 + 8000, running: 2, stepTokens: 1}));
        manager.tick();
        assert.equal(deltas.length, count, "nothing after unsubscribing");
    });

    test("with no subscribers nothing is computed for views", () => {
        const {manager, feed, at} = setup();
        const percentiles = mock.method(MetricStore.prototype, "percentiles");
        const histograms = mock.method(MetricStore.prototype, "histogramViews");
        try {
            manager.onEngineReady(engineInfo());
            feed.send(arrival("a", T0));
            for (let t = T0; t < T0 + 3000; t += 100) {
                at(t);
                feed.step(step({t, running: 1, stepTokens: 1}));
                manager.tick();
            }
            assert.equal(percentiles.mock.callCount(), 0);
            assert.equal(histograms.mock.callCount(), 0);
            assert.equal(manager.subscriberCount, 0);
            // the spies do see the work once a view subscribes
            manager.subscribe(() => {});
            at(T0 + 3000);
            manager.tick();
            assert.ok(percentiles.mock.callCount() > 0);
        } finally {
            percentiles.mock.restore();
            histograms.mock.restore();
        }
    });

    test("snapshot has everything a fresh view needs; reset starts over and tells subscribers", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        feed.send(arrival("done", T0));
        feed.send(finished("done", T0 + 10, "stop", 3, 0));
        feed.send(arrival("busy", T0));
        manager.onRejected({source: "stats", reason: "bad secret"});
        at(T0 + 1000);
        manager.tick();
        const snapshot: StatsSnapshotView = manager.snapshot();
        assert.deepEqual(Object.keys(snapshot).sort(),
            ["clients", "config", "counters", "engine", "gauges", "histograms", "lastActive", "percentiles", "requests", "state", "t", "target",
                "timeSeries"]);
        assert.equal(snapshot.target, null, "our own engine: no watched servers");
        assert.deepEqual(snapshot.config, {sampleIntervalMs: 1000, throughputWindowMs: 5000, percentileWindowMs: 300_000,
            stallThresholdMs: 1000, maxRecentRequests: 500});
        assert.equal(snapshot.engine?.model.name, "tiny-test");
        assert.equal(snapshot.counters.rejectedMessages, 1);
        assert.equal(snapshot.timeSeries.length, 1);
        assert.deepEqual(JSON.parse(JSON.stringify(snapshot)), snapshot);

        const deltas: StatsDelta[] = [];
        manager.subscribe((delta) => deltas.push(delta));
        manager.reset();
        assert.equal(deltas.length, 1);
        const fresh = deltas[0]!.reset!;
        assert.deepEqual(fresh.counters.requests, {arrived: 1, inFlight: 1, completed: 0, failed: 0, aborted: 0,
            byReason: {stop: 0, length: 0, abort: 0, error: 0}});
        assert.equal(fresh.counters.rejectedMessages, 0);
        assert.deepEqual(fresh.requests.map((r) => r.id), ["busy"]);
        assert.equal(fresh.timeSeries.length, 0);
        assert.equal(fresh.histograms.e2e.count, 0);
        assert.deepEqual(fresh.histograms.promptTokens.bounds, lengthBounds2048, "length buckets survive a reset");
        assert.equal(fresh.engine?.pid, 4242);
        feed.send(finished("busy", T0 + 1100, "stop", 1, 0));
        assertLedger(manager);
    });

    test("watched servers: the target view is in snapshots, and a delta carries it whole only when it changed", () => {
        const {manager, at} = setup();
        const view: TargetView = {
            replicas: [{name: "http://a:8000", url: "http://a:8000", kind: "vllm", model: "m", version: null, status: "up", since: T0,
                error: null, running: 1, waiting: 0, kvCacheUsage: 0.5, vramUsedBytes: null}],
            notReported: ["per-request timeline"], estimated: {ttft: {count: 3, mean: 0.05, p50: 0.04, p90: 0.08, p99: 0.1}}, notes: []
        };
        manager.onTarget(view);
        assert.deepEqual(checkSnapshotView(JSON.parse(JSON.stringify(manager.snapshot()))).target, view);
        const deltas: StatsDelta[] = [];
        manager.subscribe((delta) => deltas.push(delta), {maxHz: 1000});
        at(T0 + 10);
        manager.tick();
        assert.equal(deltas.length, 0, "nothing changed");
        const down: TargetView = {...view, replicas: [{...view.replicas[0]!, status: "unreachable", since: T0 + 20, error: "connection refused"}]};
        manager.onTarget(down);
        at(T0 + 30);
        manager.tick();
        assert.deepEqual(checkDelta(JSON.parse(JSON.stringify(deltas.at(-1)))).target, down);
    });

    test("rejects nonsense options with a named error", () => {
        assert.throws(() => new StatsManager({sampleIntervalMs: 0, tickIntervalMs: 0}), StatsOptionsError);
        assert.throws(() => new StatsManager({maxRecentRequests: 1.5, tickIntervalMs: 0}), /maxRecentRequests must be a positive integer/);
    });
});

/** A request of `client` arriving at `t`. */
const arrivalOf = (id: string, client: string, t: number): HostEvent => ({kind: "arrival", id, t, priority: 0, maxTokens: 16, client});

type ExpectedClient = Omit<ClientStatsView, "ttftP50S" | "ttftP99S" | "itlP50S" | "itlP99S"> & {ttft: [number, number] | null, itl: [number, number] | null};

/** The client rows exactly: counts equal, percentiles within float rounding of the hand-computed numpy values. */
function assertClients(actual: ClientStatsView[], expected: ExpectedClient[]): void {
    assert.deepEqual(actual.map((row) => row.client), expected.map((row) => row.client));
    expected.forEach(({ttft, itl, ...counts}, i) => {
        const row = actual[i]!;
        const {ttftP50S, ttftP99S, itlP50S, itlP99S, ...actualCounts} = row;
        assert.deepEqual(actualCounts, counts);
        for (const [name, values, want] of [["ttft", [ttftP50S, ttftP99S], ttft], ["itl", [itlP50S, itlP99S], itl]] as const) {
            if (want === null) {
                assert.deepEqual(values, [null, null], `${row.client} ${name}`);
                continue;
            }
            values.forEach((value, j) => assert.ok(value !== null && Math.abs(value - want[j]!) < 1e-12,
                `${row.client} ${name} ${j === 0 ? "p50" : "p99"}: ${value} ≠ ${want[j]}`));
        }
        assert.equal(row.arrived, row.completed + row.failed + row.aborted + row.inFlight, `${row.client}: ledger broken`);
    });
}

describe("the last active period (how fast was it, once idle)", () => {
    /** One request: arrives at `t`, `promptTokens` prefilled, `times` its tokens (delivered with the last), finish delivered at `end`. */
    function request(feed: StepFeeder, id: string, t: number, promptTokens: number, times: number[], end: number): {arrive(): void, run(): void} {
        return {
            arrive: () => feed.send(arrival(id, t)),
            run: () => {
                feed.send({kind: "inputProcessed", id, t, promptTokens, receivedAt: t});
                feed.send({kind: "queued", id, t, receivedAt: t});
                feed.send({kind: "scheduled", id, t: t + 5, cachedTokens: 0, receivedAt: t + 5});
                feed.send({kind: "tokens", id, text: "x".repeat(times.length), times, receivedAt: times.at(-1)!});
                feed.send(finished(id, end - 5, "length", promptTokens, times.length, end));
            }
        };
    }

    test("after the work and the throughput window have passed, the view still carries the period's average rates and when it ended", () => {
        const {manager, feed, at} = setup({throughputWindowMs: 5000});
        manager.onEngineReady(engineInfo());
        manager.onEngineState("ready");
        const deltas: StatsDelta[] = [];
        manager.subscribe((delta) => deltas.push(delta), {maxHz: 1000});
        assert.equal(manager.snapshot().lastActive, null, "no work yet");
        // two overlapping requests: one period, from a's arrival to b's finish (1 s)
        const a = request(feed, "a", T0, 10, [T0 + 100, T0 + 200, T0 + 300, T0 + 400], T0 + 410);
        const b = request(feed, "b", T0 + 50, 6, [T0 + 500, T0 + 600, T0 + 700, T0 + 800, T0 + 900], T0 + 1000);
        at(T0);
        a.arrive();
        at(T0 + 50);
        b.arrive();
        at(T0 + 410);
        a.run();
        manager.tick();
        assert.equal(manager.snapshot().lastActive, null, "b still runs: the period has not ended");
        at(T0 + 1000);
        b.run();
        manager.tick();
        const period = {startedAt: T0, endedAt: T0 + 1000, promptTokens: 16, generationTokens: 9, requests: 2,
            promptTokensPerS: 16, generationTokensPerS: 9, requestsPerS: 2};
        assert.deepEqual(manager.snapshot().lastActive, period);
        const carried = deltas.filter((delta) => delta.lastActive !== undefined);
        assert.equal(carried.length, 1, "sent once, when the period ended");
        assert.deepEqual(checkDelta(JSON.parse(JSON.stringify(carried[0]))).lastActive, period);

        at(T0 + 10_000);
        manager.tick();
        const idle = manager.snapshot();
        assert.equal(idle.gauges.generationTokensPerS, 0, "the windowed rate has dropped to 0");
        assert.equal(idle.state, "idle");
        assert.deepEqual(idle.lastActive, period, "the last period's rates stay");
        assert.equal(deltas.filter((delta) => delta.lastActive !== undefined).length, 1, "unchanged: not sent again");

        // the next period replaces it once it ends (while it runs, the view keeps the previous one)
        const c = request(feed, "c", T0 + 20_000, 4, [T0 + 20_100, T0 + 20_200], T0 + 20_250);
        at(T0 + 20_000);
        c.arrive();
        manager.tick();
        assert.deepEqual(manager.snapshot().lastActive, period);
        assert.equal(manager.snapshot().counters.requests.inFlight, 1);
        at(T0 + 20_250);
        c.run();
        manager.tick();
        assert.deepEqual(manager.snapshot().lastActive, {startedAt: T0 + 20_000, endedAt: T0 + 20_250, promptTokens: 4, generationTokens: 2,
            requests: 1, promptTokensPerS: 16, generationTokensPerS: 8, requestsPerS: 4});
        assert.deepEqual(deltas.at(-1)!.lastActive, manager.snapshot().lastActive);
        assertLedger(manager);
    });

    test("requests the engine's exit ends close the period; reset forgets it and a request in flight starts a new one", () => {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        at(T0);
        feed.send(arrival("lost", T0));
        at(T0 + 500);
        feed.endOnHost(["lost"], "engine exited", T0 + 500);
        const ended = manager.snapshot().lastActive;
        assert.deepEqual([ended?.startedAt, ended?.endedAt, ended?.requests, ended?.generationTokensPerS], [T0, T0 + 500, 1, 0]);
        feed.send(arrival("busy", T0 + 600));
        at(T0 + 1000);
        manager.reset();
        assert.equal(manager.snapshot().lastActive, null, "reset clears it");
        at(T0 + 1500);
        feed.send(finished("busy", T0 + 1500, "stop", 3, 0));
        assert.deepEqual([manager.snapshot().lastActive?.startedAt, manager.snapshot().lastActive?.endedAt], [T0 + 1000, T0 + 1500],
            "the period in flight at the reset counts from the reset");
    });
});

describe("per-client breakdown", () => {
    /**
     * curl: c1 stop (TTFT 150 ms, ITL 20, 30 ms), c2 length (TTFT 110 ms, ITL 40, 60 ms);
     * openai-js: o1 error after one token (TTFT 60 ms), o2 aborted in the queue, o3 running (TTFT 490 ms, ITL 10 ms);
     * Continue: k1 waiting. c2's and o3's tokens come in one outputs message.
     */
    function threeClients(): {manager: StatsManager, feed: StepFeeder, at: (t: number) => void} {
        const {manager, feed, at} = setup();
        manager.onEngineReady(engineInfo());
        feed.send(arrivalOf("c1", "curl", T0));
        at(T0 + 10);
        feed.send(arrivalOf("o1", "openai-js", T0 + 10));
        at(T0 + 20);
        feed.send(arrivalOf("o2", "openai-js", T0 + 20));
        at(T0 + 30);
        feed.send(arrivalOf("o3", "openai-js", T0 + 30));
        at(T0 + 40);
        feed.send(arrivalOf("k1", "Continue", T0 + 40));
        at(T0 + 50);
        feed.send({kind: "queued", id: "o2", t: T0 + 50, receivedAt: T0 + 50});
        at(T0 + 70);
        feed.send({kind: "tokens", id: "o1", text: "a", times: [T0 + 60], receivedAt: T0 + 70});
        at(T0 + 80);
        feed.send({kind: "finished", id: "o1", t: T0 + 80, reason: "error", promptTokens: 4, generatedTokens: 1, error: "boom", receivedAt: T0 + 80});
        at(T0 + 90);
        feed.send(finished("o2", T0 + 90, "abort", 7, 0));
        at(T0 + 150);
        feed.send({kind: "tokens", id: "c1", text: "abc", times: [T0 + 100, T0 + 120, T0 + 150], receivedAt: T0 + 150});
        at(T0 + 160);
        feed.send(finished("c1", T0 + 160, "stop", 10, 3));
        at(T0 + 200);
        feed.send(arrivalOf("c2", "curl", T0 + 200));
        at(T0 + 310);
        feed.send({kind: "tokens", id: "c2", text: "a", times: [T0 + 300], receivedAt: T0 + 310});
        at(T0 + 520);
        feed.outputs([
            {kind: "tokens", id: "c2", text: "bc", times: [T0 + 340, T0 + 400]},
            {kind: "tokens", id: "o3", text: "ab", times: [T0 + 500, T0 + 510]}
        ], undefined, T0 + 520);
        at(T0 + 530);
        feed.send(finished("c2", T0 + 530, "length", 5, 3));
        return {manager, feed, at};
    }

    const curl: ExpectedClient = {client: "curl", arrived: 2, inFlight: 0, completed: 2, failed: 0, aborted: 0, promptTokens: 15, generationTokens: 6,
        ttft: [0.13, 0.11 + 0.04 * 0.99], itl: [0.035, 0.04 + 0.02 * 0.97]};
    const openai: ExpectedClient = {client: "openai-js", arrived: 3, inFlight: 1, completed: 0, failed: 1, aborted: 1, promptTokens: 11,
        generationTokens: 1, ttft: [0.275, 0.06 + 0.43 * 0.99], itl: [0.01, 0.01]};
    const idle: ExpectedClient = {client: "Continue", arrived: 1, inFlight: 1, completed: 0, failed: 0, aborted: 0, promptTokens: 0,
        generationTokens: 0, ttft: null, itl: null};

    test("requests, outcomes, tokens and TTFT / ITL percentiles per client, exactly", () => {
        const {manager, feed} = threeClients();
        // the one outputs message with two clients' tokens: each ITL sample says whose it is
        const mixed = feed.steps.at(-2)!.iteration;
        assert.deepEqual(mixed.itlS.map((s) => Number(s.toFixed(6))), [0.04, 0.06, 0.01]);
        assert.deepEqual(mixed.itlClients, ["curl", "curl", "openai-js"]);

        const snapshot = manager.snapshot();
        assertClients(snapshot.clients, [curl, openai, idle]);
        assert.deepEqual(JSON.parse(JSON.stringify(snapshot.clients)), snapshot.clients);
        // the rows add up to the global ledger and the finished requests' token sums
        const sum = (key: "arrived" | "inFlight" | "completed" | "failed" | "aborted"): number =>
            snapshot.clients.reduce((total, row) => total + row[key], 0);
        const {requests} = snapshot.counters;
        assert.deepEqual([sum("arrived"), sum("inFlight"), sum("completed"), sum("failed"), sum("aborted")],
            [requests.arrived, requests.inFlight, requests.completed, requests.failed, requests.aborted]);
        const totals = manager.benchTotals();
        assert.equal(snapshot.clients.reduce((total, row) => total + row.promptTokens, 0), totals.finishedPromptTokens);
        assert.equal(snapshot.clients.reduce((total, row) => total + row.generationTokens, 0), totals.finishedGenerationTokens);
        assert.equal(snapshot.percentiles.itl.count, 5, "the global ITLs are all the clients' ITLs");
    });

    test("deltas carry the whole table when it changed, and leave it out when not", () => {
        const {manager, feed, at} = threeClients();
        const deltas: StatsDelta[] = [];
        manager.subscribe((delta) => deltas.push(delta));
        at(T0 + 1000);
        manager.tick();
        assert.equal(deltas.length, 1);
        assert.equal(deltas[0]!.clients, undefined, "the gauges moved, the table did not");
        feed.send(arrivalOf("b1", "bench", T0 + 1000));
        at(T0 + 1300);
        manager.tick();
        assert.deepEqual(deltas.at(-1)!.clients?.map((row) => [row.client, row.arrived, row.inFlight]),
            [["curl", 2, 0], ["openai-js", 3, 1], ["Continue", 1, 1], ["bench", 1, 1]]);
        feed.step(step({t: T0 + 1400, running: 2}));
        at(T0 + 1600);
        manager.tick();
        assert.equal(deltas.length, 3);
        assert.equal(deltas[2]!.clients, undefined, "a step that changed no client sends no table");
    });

    test(`at most ${maxClients} labels get a row; later new labels count in "other", ITLs included`, () => {
        const {manager, feed} = setup();
        const labels = Array.from({length: maxClients + 8}, (_, i) => `client-${i}`);
        labels.forEach((label, i) => {
            feed.send(arrivalOf(`r${i}`, label, T0));
            feed.send({kind: "tokens", id: `r${i}`, text: "ab", times: [T0 + 10, T0 + 10 + i], receivedAt: T0 + 10 + i});
            feed.send(finished(`r${i}`, T0 + 50, "stop", 1, 2));
        });
        // a known label keeps its row; a client named "other" shares the fold row
        feed.send(arrivalOf("again", "client-0", T0 + 60));
        feed.send(arrivalOf("literal", "other", T0 + 60));
        const clients = manager.snapshot().clients;
        assert.equal(clients.length, maxClients + 1);
        assert.deepEqual(clients.map((row) => row.client), [...labels.slice(0, maxClients), "other"]);
        assert.deepEqual(clients[0], {client: "client-0", arrived: 2, inFlight: 1, completed: 1, failed: 0, aborted: 0, promptTokens: 1,
            generationTokens: 2, ttftP50S: 0.01, ttftP99S: 0.01, itlP50S: 0, itlP99S: 0});
        assert.equal(clients[31]!.itlP50S, 0.031);
        // the 8 folded requests (ITL 32…39 ms, TTFT 42…49 ms) and the one named "other"
        const other = clients[maxClients]!;
        const {ttftP50S, ttftP99S, itlP50S, itlP99S, ...counts} = other;
        assert.deepEqual(counts, {client: "other", arrived: 9, inFlight: 1, completed: 8, failed: 0, aborted: 0, promptTokens: 8, generationTokens: 16});
        assert.ok(Math.abs(itlP50S! - 0.0355) < 1e-12 && Math.abs(itlP99S! - (0.038 + 0.001 * 0.93)) < 1e-12, `${itlP50S} ${itlP99S}`);
        assert.ok(Math.abs(ttftP50S! - 0.0455) < 1e-12 && Math.abs(ttftP99S! - (0.048 + 0.001 * 0.93)) < 1e-12, `${ttftP50S} ${ttftP99S}`);
    });

    test("each client keeps at most maxClientWindowValues TTFTs and ITLs", () => {
        const {manager, feed} = setup({maxClientWindowValues: 3});
        feed.send(arrivalOf("a", "curl", T0));
        // ITLs 10, 20, 30, 40, 50 ms: only 30, 40, 50 are kept
        feed.send({kind: "tokens", id: "a", text: "", times: [T0, T0 + 10, T0 + 30, T0 + 60, T0 + 100, T0 + 150], receivedAt: T0 + 150});
        const [row] = manager.snapshot().clients;
        assert.equal(row!.itlP50S, 0.04);
        assert.ok(Math.abs(row!.itlP99S! - 0.0498) < 1e-12, String(row!.itlP99S));
        assert.equal(manager.snapshot().percentiles.itl.count, 5, "the global window is its own");
    });

    test("reset clears the table; requests in flight count as arrived again in their rows and finish there", () => {
        const {manager, feed, at} = threeClients();
        const deltas: StatsDelta[] = [];
        manager.subscribe((delta) => deltas.push(delta));
        at(T0 + 600);
        manager.reset();
        const zero = {completed: 0, failed: 0, aborted: 0, promptTokens: 0, generationTokens: 0, ttft: null, itl: null} as const;
        const afterReset: ExpectedClient[] = [{client: "openai-js", arrived: 1, inFlight: 1, ...zero}, {client: "Continue", arrived: 1, inFlight: 1, ...zero}];
        assertClients(deltas[0]!.reset!.clients, afterReset);
        assertClients(manager.snapshot().clients, afterReset);
        // o3's TTFT was recorded before the reset; its next ITLs and its finish count in the new row
        at(T0 + 700);
        feed.send({kind: "tokens", id: "o3", text: "c", times: [T0 + 530], receivedAt: T0 + 700});
        feed.send(finished("o3", T0 + 710, "stop", 6, 3, T0 + 710));
        feed.send(arrivalOf("c3", "curl", T0 + 720));
        assertClients(manager.snapshot().clients, [
            {client: "openai-js", arrived: 1, inFlight: 0, completed: 1, failed: 0, aborted: 0, promptTokens: 6, generationTokens: 3, ttft: null,
                itl: [0.02, 0.02]},
            {client: "Continue", arrived: 1, inFlight: 1, ...zero},
            {client: "curl", arrived: 1, inFlight: 1, ...zero}
        ]);
        assertLedger(manager);
    });
});

describe("loggers and wiring", () => {
    test("every logger gets one record per step (vLLM's scheduler + iteration stats) and the gauges at ready and once per tick", () => {
        const {manager, feed, at} = setup();
        const calls: LoggerCall[] = [];
        const other: string[] = [];
        manager.addLogger(recordingLogger((call) => calls.push(call)));
        manager.addLogger(recordingLogger((call) => other.push(call.call)));
        calls.length = 0;
        other.length = 0;
        manager.onEngineReady(engineInfo());
        feed.send(arrival("a", T0));
        feed.send({kind: "inputProcessed", id: "a", t: T0, promptTokens: 5, receivedAt: T0});
        // one outputs message: two tokens of a, a preemption, the step stats
        feed.outputs([{kind: "tokens", id: "a", text: "", times: [T0 + 1, T0 + 11]}, {kind: "preempted", id: "a", t: T0 + 12}],
            step({t: T0 + 12, running: 1, stepTokens: 7}), T0 + 20);
        feed.send(finished("a", T0 + 30, "abort", 5, 2));
        manager.onRejected();
        at(T0 + 250);
        manager.tick();
        // the gauges also right at "ready" (the VRAM read at load must not wait for the first tick)
        assert.deepEqual(calls.map((c) => c.call), ["recordEngine", "log", "record", "record", "record", "record", "recordRejected", "log"]);
        assert.deepEqual(other, calls.map((c) => c.call), "every logger sees the same calls");
        const [, , arrivalCall, , tokensCall, finishCall] = calls;
        assert.ok(arrivalCall?.call === "record" && tokensCall?.call === "record" && finishCall?.call === "record");
        assert.equal(arrivalCall.scheduler, undefined, "an arrival is a host-side step");
        assert.deepEqual(arrivalCall.iteration.arrived.map((r) => r.id), ["a"]);
        assert.equal(tokensCall.scheduler?.stepTokens, 7);
        assert.equal(tokensCall.iteration.generationTokens, 2);
        assert.equal(tokensCall.iteration.promptTokens, 5, "prompt tokens count when the prefill is done");
        assert.deepEqual(tokensCall.iteration.ttftS, [0.02]);
        assert.deepEqual(tokensCall.iteration.itlS.map((s) => Number(s.toFixed(6))), [0.01]);
        assert.equal(tokensCall.iteration.preemptions, 1);
        assert.deepEqual(finishCall.iteration.finished.map((r) => [r.id, r.reason, r.metrics.e2eS]), [["a", "abort", 0.03]]);
        const log = calls.at(-1);
        assert.ok(log?.call === "log");
        assert.equal(log.now, T0 + 250);
        assert.equal(log.gauges.running, 1);

        // a logger arriving late learns the engine info and the gauges
        const late: LoggerCall[] = [];
        manager.primeLogger(recordingLogger((call) => late.push(call)));
        assert.deepEqual(late.map((call) => call.call), ["recordEngine", "log"]);
        assert.equal(late[0]!.call === "recordEngine" && late[0]!.maxModelLen, 2048);
    });

    test("a real EngineClient feeds the manager through observe(), and stops when unobserved", async () => {
        const {manager} = setup();
        const client = new EngineClient({modelPath: "/nonexistent.gguf", statsIntervalMs: 0});
        const unobserve = client.observe(manager);
        // never started: the request arrives, then ends on the host with `error`
        const result = await client.generate({prompt: "hello", maxTokens: 4}).done;
        assert.equal(result.reason, "error");
        assert.match(result.error ?? "", /engine is not running/);
        assert.deepEqual(manager.counters().requests, {arrived: 1, inFlight: 0, completed: 0, failed: 1, aborted: 0,
            byReason: {stop: 0, length: 0, abort: 0, error: 1}});
        const [record] = manager.snapshot().requests;
        assert.equal(record?.id, result.id);
        assert.equal(record?.phase, "finished");
        assert.equal(record?.arrival, result.arrival, "the ledger holds the same lifecycle the caller gets");
        unobserve();
        await client.generate({prompt: "again", maxTokens: 4}).done;
        assert.equal(manager.counters().requests.arrived, 1);
        assertLedger(manager);
    });

    test("engine state, snapshots, rejections and exit move the manager's state", () => {
        const {manager, feed} = setup();
        manager.onEngineState("loading");
        assert.equal(manager.state, "loading");
        manager.onEngineReady(engineInfo());
        manager.onEngineState("ready");
        feed.send(arrival("a", T0));
        feed.step(step({t: T0, running: 1, stepTokens: 1}));
        manager.onStatsSnapshot(snapshotMsg({t: T0 + 1, running: 1, waiting: 3}));
        manager.onRejected({source: "engine", reason: "nope"});
        assert.equal(manager.state, "busy");
        assert.equal(manager.gauges().waiting, 3);
        assert.equal(manager.counters().rejectedMessages, 1);
        feed.send(finished("a", T0 + 5, "error", 0, 0));
        manager.onEngineExit({code: null, signal: "SIGKILL", description: "signal SIGKILL"});
        assert.equal(manager.state, "crashed");
        assertLedger(manager);
    });
});
