/**
 * The stat loggers: vLLM's periodic log line (exact text, GPU/CPU wording, quiet when idle) and the
 * Prometheus exporter, fetched over HTTP and parsed with parse-prometheus-text-format: names, types,
 * labels and buckets must be vLLM V1's, and the counts what was fed.
 */
import assert from "node:assert/strict";
import http from "node:http";
import {after, before, describe, test} from "node:test";
import {register as globalRegistry} from "prom-client";
import type {FinishReason, StepStats} from "../../protocol/engineMessages.js";
import {emptyIteration, type IterationStats} from "../../extension/host/engineClient/engineStep.js";
import {LoggingStatLogger} from "../../extension/host/stats/loggers/loggingStatLogger.js";
import {PortInUseError} from "../../extension/host/net/listen.js";
import {PrometheusStatLogger} from "../../extension/host/stats/loggers/prometheusStatLogger.js";
import type {EngineGaugeValues} from "../../extension/host/stats/loggers/statLogger.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {engineInfo} from "../helpers/engineInfoFixture.js";
import {parsePrometheusTextFormat, type PromFamily} from "../helpers/prometheusText.js";
import {StepFeeder, type HostEvent} from "../helpers/stepFeeder.js";


const T0 = 1_700_000_000_000;

/** Families by name; same-named families (untyped _bucket/_sum/_count runs of several series) merged. */
function indexFamilies(text: string, histogramsUntyped = false): Map<string, PromFamily> {
    const source = histogramsUntyped ? text.replace(/^(# TYPE \S+) histogram$/gm, "$1 untyped") : text;
    const index = new Map<string, PromFamily>();
    for (const family of parsePrometheusTextFormat(source)) {
        const known = index.get(family.name);
        if (known === undefined)
            index.set(family.name, family);
        else
            known.metrics.push(...family.metrics);
    }
    return index;
}

// vLLM V1's buckets (vllm/v1/metrics/loggers.py), written out here independently of buckets.ts.
const vllmBuckets = {
    ttft: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0],
    tokenLatency: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0],
    requestLatency: [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0],
    iterationTokens: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    /** build_1_2_5_buckets(2048) */
    lengths2048: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]
};


function gauges(overrides: Partial<EngineGaugeValues>): EngineGaugeValues {
    return {state: "idle", running: 0, waiting: 0, kvCacheUsage: 0, vramUsedBytes: 0, vramTotalBytes: 0, msSinceLastStep: 0, ...overrides};
}

/** What one step did: tokens only (the log line counts those). */
const tokens = (t: number, promptTokens: number, generationTokens: number): IterationStats =>
    ({...emptyIteration(t), promptTokens, generationTokens});

const step = (t: number, overrides: Partial<StepStats>): StepStats =>
    ({t, running: 0, waiting: 0, stepTokens: 0, kvUsedTokens: 0, kvCapacityTokens: 2048, ...overrides});
const finished = (id: string, t: number, reason: FinishReason, promptTokens: number, generatedTokens: number): HostEvent =>
    ({kind: "finished", id, t, reason, promptTokens, generatedTokens, receivedAt: t});

describe("LoggingStatLogger", () => {
    const gpuLine = "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 25.0 tokens/s, " +
        "Running: 2 reqs, Waiting: 1 reqs, GPU KV cache usage: 25.0%, Prefix cache hit rate: 0.0%";

    test("vLLM's line, exactly, once per interval", () => {
        const lines: string[] = [];
        const logger = new LoggingStatLogger({write: (line) => lines.push(line), now: () => T0});
        const busy = gauges({state: "busy", running: 2, waiting: 1, kvCacheUsage: 0.25});
        logger.recordEngine(engineInfo(), 2048);
        logger.record(undefined, tokens(T0 + 1, 100, 1));
        logger.record(undefined, tokens(T0 + 2, 0, 249));
        logger.log(T0 + 9_999, busy);
        assert.deepEqual(lines, []);
        logger.log(T0 + 10_000, busy);
        assert.deepEqual(lines, [gpuLine]);
    });

    test("says `KV cache usage` on the CPU backend and numbers the engine", () => {
        const lines: string[] = [];
        const logger = new LoggingStatLogger({write: (line) => lines.push(line), logIntervalS: 5, engineIndex: 1, now: () => T0});
        logger.recordEngine(engineInfo({backend: "cpu"}), 2048);
        logger.record(undefined, tokens(T0 + 1, 7, 3));
        logger.log(T0 + 5_000, gauges({state: "busy", running: 1, kvCacheUsage: 0.125}));
        assert.deepEqual(lines, ["Engine 001: Avg prompt throughput: 1.4 tokens/s, Avg generation throughput: 0.6 tokens/s, " +
            "Running: 1 reqs, Waiting: 0 reqs, KV cache usage: 12.5%, Prefix cache hit rate: 0.0%"]);
    });

    test("quiet when idle, but reports the interval in which activity stopped", () => {
        const lines: string[] = [];
        const logger = new LoggingStatLogger({write: (line) => lines.push(line), now: () => T0});
        const idle = gauges({state: "idle"});
        logger.recordEngine(engineInfo(), 2048);
        logger.log(T0 + 10_000, idle); // idle from the start: nothing
        assert.equal(lines.length, 0);
        logger.log(T0 + 10_001, gauges({state: "busy", running: 1}));
        logger.record(undefined, tokens(T0 + 10_001, 20, 30));
        logger.log(T0 + 20_000, idle);
        logger.log(T0 + 30_000, idle); // the interval after activity stopped: one more line, all zeros
        logger.log(T0 + 40_000, idle); // then quiet
        logger.log(T0 + 50_000, idle);
        const idleLine = "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%";
        assert.deepEqual(lines, [
            `Engine 000: Avg prompt throughput: 2.0 tokens/s, Avg generation throughput: 3.0 tokens/s, ${idleLine}`,
            `Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, ${idleLine}`
        ]);
        // a stalled engine (requests running, no tokens) is not idle: it keeps logging
        logger.log(T0 + 60_000, gauges({state: "stalled", running: 2, waiting: 1}));
        assert.equal(lines.length, 3);
        assert.equal(lines[2], "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, " +
            "Running: 2 reqs, Waiting: 1 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%");
    });

    test("prefix cache hit rate: cached / queried tokens of the last N requests, %.1f, cleared by reset", () => {
        const lines: string[] = [];
        const logger = new LoggingStatLogger({write: (line) => lines.push(line), logIntervalS: 1, prefixCacheWindowRequests: 2, now: () => T0});
        const busy = gauges({state: "busy", running: 1});
        const lookups = (t: number, requests: number, queries: number, hits: number): IterationStats =>
            ({...emptyIteration(t), prefixCacheRequests: requests, prefixCacheQueries: queries, prefixCacheHits: hits});
        const rate = (line: string | undefined): string | undefined => /Prefix cache hit rate: (.*)$/.exec(line ?? "")?.[1];
        logger.record(undefined, lookups(T0, 1, 300, 0));
        logger.record(undefined, lookups(T0, 1, 300, 200));
        logger.log(T0 + 1000, busy);
        assert.equal(rate(lines.at(-1)), "33.3%", "200 of 600");
        logger.record(undefined, lookups(T0 + 1000, 0, 0, 0)); // a step without lookups changes nothing
        logger.record(undefined, lookups(T0 + 1000, 1, 100, 99)); // the first request leaves the window of 2
        logger.log(T0 + 2000, busy);
        assert.equal(rate(lines.at(-1)), "74.8%", "299 of 400");
        logger.reset(T0 + 2000);
        logger.log(T0 + 3000, busy);
        assert.equal(rate(lines.at(-1)), "0.0%");
        assert.equal(lines.length, 3);
    });

    test("with a prompt cache, the line ends with vLLM's external prefix cache hit rate; without one it has none", () => {
        const lines: string[] = [];
        const logger = new LoggingStatLogger({write: (line) => lines.push(line), logIntervalS: 1, now: () => T0});
        const busy = gauges({state: "busy", running: 1});
        logger.record(undefined, {...emptyIteration(T0), prefixCacheRequests: 2, prefixCacheQueries: 400, prefixCacheHits: 100,
            externalPrefixCacheRequests: 2, externalPrefixCacheQueries: 400, externalPrefixCacheHits: 250});
        logger.log(T0 + 1000, busy);
        assert.doesNotMatch(lines.at(-1)!, /External/, "no engine info yet: no prompt cache known");
        logger.recordEngine(engineInfo({promptCacheMiB: 64}), 2048);
        logger.log(T0 + 2000, busy);
        assert.match(lines.at(-1)!, /, Prefix cache hit rate: 25\.0%, External prefix cache hit rate: 62\.5%$/);
        logger.recordEngine(engineInfo({promptCacheMiB: 0}), 2048);
        logger.log(T0 + 3000, busy);
        assert.match(lines.at(-1)!, /Prefix cache hit rate: 25\.0%$/);
    });

    test("driven by StatsManager's tick on a fake clock", () => {
        const clock = {now: T0};
        const lines: string[] = [];
        const manager = new StatsManager({now: () => clock.now, tickIntervalMs: 0,
            loggers: [new LoggingStatLogger({write: (line) => lines.push(line), now: () => clock.now})]});
        const feed = new StepFeeder(manager);
        manager.onEngineReady(engineInfo());
        feed.send({kind: "arrival", id: "a", t: T0, priority: 0, maxTokens: 1000});
        feed.send({kind: "inputProcessed", id: "a", t: T0, promptTokens: 40, receivedAt: T0});
        feed.send({kind: "scheduled", id: "a", t: T0, cachedTokens: 30, receivedAt: T0});
        for (let t = T0 + 250; t <= T0 + 20_000; t += 250) {
            clock.now = t;
            if (t <= T0 + 15_000) {
                feed.send({kind: "tokens", id: "a", text: "", times: [t - 100, t - 50], receivedAt: t});
                feed.step(step(t, {running: 1, stepTokens: 2, kvUsedTokens: 1024}));
            } else if (t === T0 + 15_250) {
                feed.send(finished("a", t, "length", 40, 120));
                feed.step(step(t, {running: 0, stepTokens: 0}));
            }
            manager.tick();
        }
        // the hit rate is over the recent requests, not the interval: a's 30 of 40 in both lines
        assert.deepEqual(lines, [
            "Engine 000: Avg prompt throughput: 4.0 tokens/s, Avg generation throughput: 8.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, " +
                "GPU KV cache usage: 50.0%, Prefix cache hit rate: 75.0%",
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 4.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, " +
                "GPU KV cache usage: 0.0%, Prefix cache hit rate: 75.0%"
        ]);
    });
});

describe("PrometheusStatLogger", () => {
    let prometheus: PrometheusStatLogger;
    let families: Map<string, PromFamily>;
    /** The same text with histograms parsed as untyped, to see their labels, _sum and _count (the parser drops those of labelled histograms). */
    let untyped: Map<string, PromFamily>;
    let exposition: string;

    before(async () => {
        const clock = {now: T0};
        prometheus = await PrometheusStatLogger.start({port: 0});
        const manager = new StatsManager({now: () => clock.now, tickIntervalMs: 0, loggers: [prometheus]});
        const feeder = new StepFeeder(manager);
        const feed = (t: number, event: HostEvent): void => {
            clock.now = t;
            feeder.send(event);
        };
        manager.onEngineReady(engineInfo());
        // a: 10 prompt tokens, 3 generated, finished by length
        feed(T0, {kind: "arrival", id: "a", t: T0, priority: 0, maxTokens: 3});
        feed(T0 + 1, {kind: "inputProcessed", id: "a", t: T0 + 1, promptTokens: 10, receivedAt: T0 + 1});
        feed(T0 + 1, {kind: "queued", id: "a", t: T0 + 1, receivedAt: T0 + 1});
        feed(T0 + 101, {kind: "scheduled", id: "a", t: T0 + 101, cachedTokens: 4, receivedAt: T0 + 101});
        feed(T0 + 305, {kind: "tokens", id: "a", text: "a", times: [T0 + 301], receivedAt: T0 + 305});
        feed(T0 + 425, {kind: "tokens", id: "a", text: "bc", times: [T0 + 351, T0 + 421], receivedAt: T0 + 425});
        feed(T0 + 430, finished("a", T0 + 430, "length", 10, 3));
        // b: 5 prompt tokens, 2 generated, preempted, then aborted
        feed(T0, {kind: "arrival", id: "b", t: T0, priority: 0, maxTokens: 50});
        feed(T0 + 2, {kind: "inputProcessed", id: "b", t: T0 + 2, promptTokens: 5, receivedAt: T0 + 2});
        feed(T0 + 2, {kind: "queued", id: "b", t: T0 + 2, receivedAt: T0 + 2});
        feed(T0 + 502, {kind: "scheduled", id: "b", t: T0 + 502, cachedTokens: 2, receivedAt: T0 + 502});
        feed(T0 + 1502, {kind: "tokens", id: "b", text: "xy", times: [T0 + 1400, T0 + 1500], receivedAt: T0 + 1502});
        feed(T0 + 1600, {kind: "preempted", id: "b", t: T0 + 1600, receivedAt: T0 + 1600});
        feed(T0 + 2000, finished("b", T0 + 2000, "abort", 5, 2));
        // c: never scheduled, failed
        feed(T0, {kind: "arrival", id: "c", t: T0, priority: 0, maxTokens: 7});
        feed(T0 + 3, {kind: "inputProcessed", id: "c", t: T0 + 3, promptTokens: 4, receivedAt: T0 + 3});
        feed(T0 + 3, {kind: "queued", id: "c", t: T0 + 3, receivedAt: T0 + 3});
        feed(T0 + 3000, finished("c", T0 + 3000, "error", 4, 0));
        feeder.step(step(T0 + 3000, {stepTokens: 12}));
        feeder.step(step(T0 + 3001, {stepTokens: 2, running: 1, waiting: 2, kvUsedTokens: 512}));
        manager.onRejected({source: "engine", reason: "bad"});
        manager.onRejected({source: "stats", reason: "bad"});
        manager.onRejected({source: "stats", reason: "bad"});
        clock.now = T0 + 3250;
        manager.tick();

        const response = await fetch(prometheus.url!);
        assert.equal(response.status, 200);
        assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
        const text = await response.text();
        exposition = text;
        families = indexFamilies(text);
        untyped = indexFamilies(text, true);
    });

    after(async () => {
        await prometheus.dispose();
    });

    const base = {model_name: "tiny", engine: "0"};

    function family(name: string, type: string): PromFamily {
        const found = families.get(name);
        assert.ok(found !== undefined, `${name} missing from /metrics`);
        assert.equal(found.type, type, `${name} type`);
        return found;
    }

    /** The one series' value (counters and gauges), checking its labels. */
    function value(name: string, type: "COUNTER" | "GAUGE", labels: Record<string, string> = base): number {
        const series = family(name, type).metrics.filter((sample) => JSON.stringify(sample.labels) === JSON.stringify(labels));
        assert.equal(series.length, 1, `${name}${JSON.stringify(labels)}: ${JSON.stringify(family(name, type).metrics)}`);
        return Number(series[0]!.value);
    }

    /** Bucket bounds (without +Inf, ascending), the +Inf count, and _sum/_count with their labels. */
    function histogram(name: string): {bounds: number[], count: number, sum: number} {
        const samples = family(name, "HISTOGRAM").metrics;
        assert.equal(samples.length, 1, `${name}: one series`);
        const buckets = samples[0]!.buckets!;
        const bounds = Object.keys(buckets).filter((le) => le !== "+Inf").map(Number).sort((a, b) => a - b);
        const bucketSeries = untyped.get(`${name}_bucket`)!.metrics;
        for (const sample of bucketSeries) {
            const {le, ...labels} = sample.labels!;
            assert.deepEqual(labels, base, `${name}_bucket labels`);
            assert.equal(Number(sample.value), Number(buckets[le!]));
        }
        const [sum] = untyped.get(`${name}_sum`)!.metrics;
        const [count] = untyped.get(`${name}_count`)!.metrics;
        assert.deepEqual(sum!.labels, base);
        assert.deepEqual(count!.labels, base);
        assert.equal(Number(count!.value), Number(buckets["+Inf"]));
        return {bounds, count: Number(buckets["+Inf"]), sum: Number(sum!.value)};
    }

    const near = (actual: number, expected: number): void => assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} ≠ ${expected}`);

    test("latency histograms: vLLM's names, buckets and labels; counts as fed", () => {
        const ttft = histogram("vllm:time_to_first_token_seconds");
        assert.deepEqual(ttft.bounds, vllmBuckets.ttft);
        assert.equal(ttft.count, 2);
        near(ttft.sum, 0.305 + 1.502);
        const itl = histogram("vllm:inter_token_latency_seconds");
        assert.deepEqual(itl.bounds, vllmBuckets.tokenLatency);
        assert.equal(itl.count, 3);
        near(itl.sum, 0.05 + 0.07 + 0.1);
        const tpot = histogram("vllm:request_time_per_output_token_seconds");
        assert.deepEqual(tpot.bounds, vllmBuckets.tokenLatency);
        assert.equal(tpot.count, 2);
        near(tpot.sum, 0.12 / 2 + 0.1);
        const e2e = histogram("vllm:e2e_request_latency_seconds");
        assert.equal(e2e.count, 3, "requests of every finish reason");
        near(e2e.sum, 0.43 + 2 + 3);
        const expected: Record<string, {count: number, sum: number}> = {
            "vllm:request_queue_time_seconds": {count: 2, sum: 0.1 + 0.5},
            "vllm:request_prefill_time_seconds": {count: 2, sum: 0.2 + 0.898},
            "vllm:request_decode_time_seconds": {count: 2, sum: 0.12 + 0.1},
            "vllm:request_inference_time_seconds": {count: 2, sum: 0.32 + 0.998}
        };
        for (const [name, {count, sum}] of Object.entries(expected)) {
            const h = histogram(name);
            assert.deepEqual(h.bounds, vllmBuckets.requestLatency, name);
            assert.equal(h.count, count, name);
            near(h.sum, sum);
        }
        assert.deepEqual(histogram("vllm:request_queue_time_seconds").bounds, vllmBuckets.requestLatency);
    });

    test("length and iteration histograms: 1-2-5 buckets up to the model length", () => {
        const prompt = histogram("vllm:request_prompt_tokens");
        assert.deepEqual(prompt.bounds, vllmBuckets.lengths2048);
        assert.equal(prompt.count, 3);
        assert.equal(prompt.sum, 19);
        const generation = histogram("vllm:request_generation_tokens");
        assert.deepEqual(generation.bounds, vllmBuckets.lengths2048);
        assert.equal(generation.sum, 5);
        const maxTokens = histogram("vllm:request_params_max_tokens");
        assert.deepEqual(maxTokens.bounds, vllmBuckets.lengths2048);
        assert.equal(maxTokens.sum, 60);
        const prefix = families.get("vllm:request_prompt_tokens")!.metrics[0]!.buckets!;
        assert.deepEqual([prefix["2"], prefix["5"], prefix["10"]], ["0", "2", "3"], "4 and 5 ≤ 5, 10 ≤ 10 (cumulative)");
        const iteration = histogram("vllm:iteration_tokens_total");
        assert.deepEqual(iteration.bounds, vllmBuckets.iterationTokens);
        assert.equal(iteration.count, 2);
        assert.equal(iteration.sum, 14);
    });

    test("counters and gauges: vLLM's names and labels, values as fed", () => {
        assert.equal(value("vllm:prompt_tokens_total", "COUNTER"), 15, "a and b prefilled; c never did");
        assert.equal(value("vllm:generation_tokens_total", "COUNTER"), 5);
        assert.equal(value("vllm:num_preemptions_total", "COUNTER"), 1);
        assert.equal(value("vllm:prefix_cache_queries_total", "COUNTER"), 15, "a's 10 and b's 5 prompt tokens looked up; c was never scheduled");
        assert.equal(value("vllm:prefix_cache_hits_total", "COUNTER"), 6, "4 of a's, 2 of b's");
        const reasons = {stop: 0, length: 1, abort: 1, error: 1};
        for (const [reason, count] of Object.entries(reasons))
            assert.equal(value("vllm:request_success_total", "COUNTER", {...base, finished_reason: reason}), count, reason);
        assert.equal(family("vllm:request_success_total", "COUNTER").metrics.length, 4);
        assert.equal(value("vllm:num_requests_running", "GAUGE"), 1);
        assert.equal(value("vllm:num_requests_waiting", "GAUGE"), 2);
        assert.equal(value("vllm:kv_cache_usage_perc", "GAUGE"), 0.25);
        // extras of ours
        assert.equal(value("vllm:vram_used_bytes", "GAUGE"), 1e9);
        assert.equal(value("vllm:vram_total_bytes", "GAUGE"), 8e9);
        assert.equal(value("vllm:engine_stall_seconds", "GAUGE"), 0.25, "250 ms since the last step was seen (at T0+3000)");
        assert.equal(value("vllm:engine_state", "GAUGE", {...base, state: "busy"}), 1);
        assert.equal(value("vllm:engine_state", "GAUGE", {...base, state: "idle"}), 0);
        assert.equal(value("vllm:rejected_messages_total", "COUNTER", {...base, source: "engine"}), 1);
        assert.equal(value("vllm:rejected_messages_total", "COUNTER", {...base, source: "stats"}), 2);
        assert.match(family("vllm:num_requests_running", "GAUGE").help, /^Number of requests in model execution batches\.$/);
        assert.match(family("vllm:engine_stall_seconds", "GAUGE").help, /extra/);
    });

    test("prefix cache counters: vLLM's exposition lines (tokens, _total), help and type", () => {
        for (const line of [
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.",
            "# TYPE vllm:prefix_cache_queries_total counter",
            'vllm:prefix_cache_queries_total{model_name="tiny",engine="0"} 15',
            "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.",
            "# TYPE vllm:prefix_cache_hits_total counter",
            'vllm:prefix_cache_hits_total{model_name="tiny",engine="0"} 6'
        ])
            assert.ok(exposition.split("\n").includes(line), `missing: ${line}`);
    });

    test("prefix cache counters start at 0 and, like the other counters, ignore StatsManager.reset()", async () => {
        const logger = await PrometheusStatLogger.start({serve: false});
        try {
            const manager = new StatsManager({now: () => T0, tickIntervalMs: 0, loggers: [logger]});
            manager.onEngineReady(engineInfo());
            const counter = async (name: string): Promise<number> =>
                Number(indexFamilies(await logger.metricsText()).get(name)!.metrics.find((s) => s.labels?.model_name === "tiny")!.value);
            assert.equal(await counter("vllm:prefix_cache_queries_total"), 0);
            assert.equal(await counter("vllm:prefix_cache_hits_total"), 0);
            const feed = new StepFeeder(manager);
            const lookup = (id: string, promptTokens: number, cachedTokens: number): void => {
                feed.send({kind: "arrival", id, t: T0, priority: 0, maxTokens: 8});
                feed.send({kind: "inputProcessed", id, t: T0, promptTokens, receivedAt: T0});
                feed.send({kind: "scheduled", id, t: T0, cachedTokens, receivedAt: T0});
            };
            lookup("x", 40, 30);
            manager.reset();
            lookup("y", 20, 19);
            assert.deepEqual([manager.counters().prefixCacheQueries, manager.counters().prefixCacheHits], [20, 19], "the manager's reset");
            assert.equal(await counter("vllm:prefix_cache_queries_total"), 60);
            assert.equal(await counter("vllm:prefix_cache_hits_total"), 49);
        } finally {
            await logger.dispose();
        }
    });

    test("the VRAM the engine read at load is on /metrics as soon as it is ready, before any tick (a GPU run once scraped 0 there)", async () => {
        const logger = await PrometheusStatLogger.start({serve: false});
        try {
            const manager = new StatsManager({now: () => T0, tickIntervalMs: 0, loggers: [logger]});
            manager.onEngineReady(engineInfo({vramUsedBytes: 891289600, vramTotalBytes: 150754820096}));
            const gauge = async (name: string): Promise<string | undefined> =>
                indexFamilies(await logger.metricsText()).get(name)!.metrics.find((s) => s.labels?.model_name === "tiny")?.value;
            assert.equal(await gauge("vllm:vram_used_bytes"), "891289600");
            assert.equal(await gauge("vllm:vram_total_bytes"), "150754820096");
        } finally {
            await logger.dispose();
        }
    });

    test("uses its own registry, not prom-client's global one", () => {
        assert.equal(globalRegistry.getMetricsAsArray().some((metric) => metric.name.startsWith("vllm:")), false);
    });

    test("serves /metrics only", async () => {
        const url = new URL(prometheus.url!);
        assert.equal(url.hostname, "127.0.0.1");
        assert.equal(Number(url.port), prometheus.port);
        const notFound = await fetch(new URL("/other", url));
        assert.equal(notFound.status, 404);
        await notFound.text();
        const post = await fetch(url, {method: "POST"});
        assert.equal(post.status, 405);
        await post.text();
    });

    test("answers only to loopback Host names on its port (no DNS rebinding)", async () => {
        const status = async (hostHeader: string) => await new Promise<number>((resolve, reject) => {
            const request = http.request({host: "127.0.0.1", port: prometheus.port!, path: "/metrics", headers: {Host: hostHeader}}, (response) => {
                response.resume();
                resolve(response.statusCode ?? 0);
            });
            request.on("error", reject);
            request.end();
        });
        assert.equal(await status("evil.example"), 403);
        assert.equal(await status(`evil.example:${prometheus.port!}`), 403);
        assert.equal(await status(`localhost:${prometheus.port!}`), 200);
        assert.equal(await status(`127.0.0.1:${prometheus.port!}`), 200);
    });

    test("a port in use is a clear, named error", async () => {
        await assert.rejects(PrometheusStatLogger.start({port: prometheus.port!}), (error: unknown) => {
            assert.ok(error instanceof PortInUseError);
            assert.equal(error.name, "PortInUseError");
            assert.equal(error.message, `Prometheus port ${prometheus.port} on 127.0.0.1 is already in use`);
            return true;
        });
    });

    test("before the engine is ready: model_name 'unknown', length histograms replayed once buckets are known", async () => {
        const logger = await PrometheusStatLogger.start({serve: false});
        try {
            assert.equal(logger.port, undefined);
            const early = new StepFeeder({onOutputs: (step) => logger.record(step.scheduler, step.iteration)});
            early.send({kind: "arrival", id: "x", t: T0, priority: 0, maxTokens: 8});
            early.send(finished("x", T0 + 100, "error", 0, 0));
            let parsed = indexFamilies(await logger.metricsText());
            assert.equal(parsed.has("vllm:request_prompt_tokens"), false);
            assert.deepEqual(parsed.get("vllm:request_success_total")!.metrics.find((s) => s.labels?.finished_reason === "error"),
                {value: "1", labels: {model_name: "unknown", engine: "0", finished_reason: "error"}});
            logger.recordEngine(engineInfo(), 100);
            logger.log(T0, gauges({running: 3}));
            const text = await logger.metricsText();
            parsed = indexFamilies(text);
            const prompt = parsed.get("vllm:request_prompt_tokens")!.metrics[0]!.buckets!;
            assert.deepEqual(Object.keys(prompt).filter((le) => le !== "+Inf").map(Number).sort((a, b) => a - b), [1, 2, 5, 10, 20, 50, 100]);
            const buckets = indexFamilies(text, true).get("vllm:request_prompt_tokens_bucket")!.metrics;
            assert.deepEqual(buckets.find((s) => s.labels?.le === "1" && s.labels.model_name === "unknown")?.value, "1", "the early request, replayed");
            assert.deepEqual(buckets.find((s) => s.labels?.le === "1" && s.labels.model_name === "tiny")?.value, "0");
            assert.deepEqual(parsed.get("vllm:num_requests_running")!.metrics, [{value: "3", labels: base}], "stale model_name gauges removed");
            assert.equal(parsed.get("vllm:request_success_total")!.metrics.length, 5, "4 reasons for tiny, the early error for unknown");
        } finally {
            await logger.dispose();
        }
    });
});
