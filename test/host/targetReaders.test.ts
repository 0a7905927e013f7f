/**
 * Watched servers, the parts that need no server: PromQL's histogram_quantile on buckets (values
 * worked out by hand), increases across a restart, the bucket-wise merge of replicas, the exposition
 * reader on vLLM's format with two data-parallel ranks, and Ollama's `/api/ps` in its documented shape.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";
import {
    histogramIncrease, histogramQuantile, HistogramShapeError, mergeHistograms, type BucketHistogram
} from "../../extension/host/targets/bucketHistogram.js";
import {ollamaReading} from "../../extension/host/targets/ollamaReader.js";
import {ExpositionError, parseExposition, sumSamples} from "../../extension/host/targets/prometheusText.js";
import {TargetReadError} from "../../extension/host/targets/targetHttp.js";
import {vllmReadings} from "../../extension/host/targets/vllmReader.js";

const inf = Number.POSITIVE_INFINITY;
const fixture = fs.readFileSync(path.join(__dirname, "../fixtures/vllm-v1-dp2.metrics.txt"), "utf8");
const close = (actual: number | null, expected: number, what: string) =>
    assert.ok(actual !== null && Math.abs(actual - expected) < 1e-12, `${what}: ${actual} vs ${expected}`);

describe("histogram_quantile on buckets", () => {
    // 10 observations: 1 in (0.01, 0.02], 2 in (0.02, 0.04], 2 in (0.04, 0.06], 1, 2, 1, 1 above.
    const h: BucketHistogram = {
        bounds: [0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, inf],
        counts: [0, 1, 3, 5, 6, 8, 9, 10, 10], sum: 0.9, count: 10
    };

    test("interpolates linearly inside the bucket that holds the rank", () => {
        close(histogramQuantile(0.5, h), 0.06, "p50: rank 5 is the top of (0.04, 0.06]");
        close(histogramQuantile(0.25, h), 0.035, "p25: rank 2.5 is 1.5 of the 2 in (0.02, 0.04]");
        close(histogramQuantile(0.9, h), 0.25, "p90: rank 9 tops (0.1, 0.25]");
        close(histogramQuantile(0.99, h), 0.475, "p99: rank 9.9 is 0.9 of the one in (0.25, 0.5]");
        close(histogramQuantile(0.05, h), 0.015, "p5: rank 0.5 is half of the one in (0.01, 0.02]");
    });

    test("edges as PromQL: the +Inf bucket gives the highest finite bound, the first bucket starts at 0, empty is null", () => {
        const tail: BucketHistogram = {bounds: [1, 2, inf], counts: [1, 1, 4], sum: 20, count: 4};
        assert.equal(histogramQuantile(0.9, tail), 2);
        close(histogramQuantile(0.1, {bounds: [4, inf], counts: [2, 2], sum: 3, count: 2}), 0.4, "first bucket from 0: rank 0.2 of 2 in (0, 4]");
        assert.equal(histogramQuantile(0.5, {bounds: [1, inf], counts: [0, 0], sum: 0, count: 0}), null);
        assert.equal(histogramQuantile(0.5, {bounds: [inf], counts: [3], sum: 1, count: 3}), null);
    });

    test("increase over a window, and a restart (counts went down) counts everything after it", () => {
        const before: BucketHistogram = {bounds: [1, inf], counts: [2, 3], sum: 4, count: 3};
        const after: BucketHistogram = {bounds: [1, inf], counts: [5, 7], sum: 10, count: 7};
        assert.deepEqual(histogramIncrease(after, before), {bounds: [1, inf], counts: [3, 4], sum: 6, count: 4});
        const restarted: BucketHistogram = {bounds: [1, inf], counts: [1, 1], sum: 0.5, count: 1};
        assert.deepEqual(histogramIncrease(restarted, after), restarted);
        assert.deepEqual(histogramIncrease(after, undefined), after);
    });

    test("replicas merge bucket-wise; different buckets are refused", () => {
        const a: BucketHistogram = {bounds: [1, 2, inf], counts: [1, 3, 3], sum: 4, count: 3};
        const b: BucketHistogram = {bounds: [1, 2, inf], counts: [0, 1, 2], sum: 5, count: 2};
        assert.deepEqual(mergeHistograms([a, b]), {bounds: [1, 2, inf], counts: [1, 4, 5], sum: 9, count: 5});
        assert.equal(mergeHistograms([]), undefined);
        assert.throws(() => mergeHistograms([a, {bounds: [1, 3, inf], counts: [0, 0, 0], sum: 0, count: 0}]), HistogramShapeError);
    });
});

describe("the exposition reader", () => {
    test("keeps each data-parallel rank's histogram apart, with its _sum and _count", () => {
        const exposition = parseExposition(fixture);
        const ttft = exposition.histograms.get("vllm:time_to_first_token_seconds")!;
        assert.equal(ttft.length, 2);
        const rank0 = ttft.find((h) => h.labels.engine === "0")!;
        assert.deepEqual(rank0.counts, [0, 0, 0, 1, 3, 5, 6, 8, 9, 10, 10]);
        assert.equal(rank0.bounds.at(-1), inf);
        assert.equal(rank0.sum, 0.9);
        assert.equal(rank0.count, 10);
        assert.equal(rank0.labels.model_name, "Qwen/Qwen3-0.6B");
        assert.equal(rank0.labels.le, undefined);
        assert.equal(sumSamples(exposition, "vllm:generation_tokens_total"), 8000);
        assert.equal(sumSamples(exposition, "vllm:generation_tokens_total", {engine: "1"}), 1600);
    });

    test("label escapes, NaN/Inf values, timestamps", () => {
        const exposition = parseExposition('m{path="C:\\\\dir\\\\x",msg="say \\"hi\\"\\n"} 3 1395066363000\nn +Inf\no NaN\n');
        const [sample] = exposition.samples.get("m")!;
        assert.deepEqual(sample!.labels, {path: "C:\\dir\\x", msg: "say \"hi\"\n"});
        assert.equal(sample!.value, 3);
        assert.equal(sumSamples(exposition, "n"), inf);
        assert.ok(Number.isNaN(sumSamples(exposition, "o")!));
    });

    test("malformed text is refused with the line that is wrong", () => {
        assert.throws(() => parseExposition("ok 1\n{{{ garbage\n"), (e: unknown) => e instanceof ExpositionError && /line 2/.test(e.message));
        assert.throws(() => parseExposition("x{a=\"1\"} notanumber\n"), /line 1: "notanumber" is not a number/);
        assert.throws(() => parseExposition("x{a=\"1} 2\n"), /unterminated label value/);
        assert.throws(() => parseExposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_count 2\n"), /le="\+Inf"/);
    });
});

describe("vLLM readings", () => {
    test("one reading per rank: gauges, counters, KV in tokens from cache_config_info, histograms", () => {
        const ranks = vllmReadings(parseExposition(fixture));
        assert.deepEqual(ranks.map((r) => r.engine), ["0", "1"]);
        const [r0, r1] = ranks.map((r) => r.reading);
        assert.equal(r0!.model, "Qwen/Qwen3-0.6B");
        assert.deepEqual([r0!.running, r0!.waiting, r1!.running, r1!.waiting], [3, 2, 1, 0]);
        assert.deepEqual([r0!.promptTokensTotal, r0!.generationTokensTotal, r0!.preemptionsTotal], [1200, 6400, 2]);
        assert.deepEqual([r0!.prefixCacheQueriesTotal, r0!.prefixCacheHitsTotal], [1200, 480]);
        assert.deepEqual(r0!.finishedTotal, {stop: 6, length: 4, abort: 0});
        assert.equal(r0!.kvCapacityTokens, 2048 * 16);
        assert.equal(r0!.kvUsedTokens, 2048 * 16 * 0.25);
        assert.equal(r1!.kvUsedTokens, 2048 * 16 * 0.125);
        assert.deepEqual(r1!.histograms.ttft!.counts, [0, 0, 0, 0, 2, 4, 4, 4, 4, 4, 4]);
        assert.equal(r1!.histograms.itl!.count, 156);
        assert.equal(r0!.histograms.e2e, undefined, "not in the fixture, so not reported");
    });

    test("vLLM before 0.11 named the inter-token latency time_per_output_token; a server without vLLM's gauges is not vLLM", () => {
        const old = fixture.replaceAll("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds");
        assert.equal(vllmReadings(parseExposition(old))[0]!.reading.histograms.itl!.count, 630);
        assert.throws(() => vllmReadings(parseExposition("llamacpp:prompt_tokens_total 5\n")),
            (e: unknown) => e instanceof TargetReadError && /not a vLLM server/.test(e.message));
    });
});

describe("Ollama readings", () => {
    // /api/ps and /api/version as Ollama's API documentation shows them.
    const ps = {models: [{
        name: "mistral:latest", model: "mistral:latest", size: 5137025024, digest: "2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",
        details: {parent_model: "", format: "gguf", family: "llama", families: ["llama"], parameter_size: "7.2B", quantization_level: "Q4_0"},
        expires_at: "2024-06-04T14:38:31.83753-07:00", size_vram: 5137025024
    }]};

    test("loaded models, their VRAM and expiry; no request metrics, and it says so", () => {
        const reading = ollamaReading({version: "0.5.1"}, ps);
        assert.equal(reading.kind, "ollama");
        assert.equal(reading.model, "mistral:latest");
        assert.equal(reading.version, "0.5.1");
        assert.equal(reading.vramUsedBytes, 5137025024);
        assert.equal(reading.running, undefined);
        assert.equal(reading.generationTokensTotal, undefined);
        assert.match(reading.notes.join("\n"), /mistral:latest: 4\.78 GiB, 100% in VRAM, unloads at 2024-06-04/);
        assert.match(reading.notes.join("\n"), /inference-monitor proxy/);
        assert.equal(ollamaReading({version: "0.5.1"}, {models: []}).model, undefined);
    });

    test("a server that is not Ollama is named as such", () => {
        assert.throws(() => ollamaReading({}, ps), /not an Ollama server/);
        assert.throws(() => ollamaReading({version: "1"}, {models: [{size: 1}]}), /models\[0\] has no name/);
    });
});
