/**
 * The benchmark's scheduling, as vLLM's serving benchmark: arrivals on a Poisson schedule fixed in
 * advance (the first at t = 0) that waiting for a --max-concurrency slot never pushes back; latencies
 * from the send; warm-up requests first, in no metric. On a fake target whose requests take a set time.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {nowMs} from "../../common/clock.js";
import {Xoshiro128, nextUnit} from "../../common/seededRandom.js";
import {computeBenchMetrics, computeClientQueueMetrics, type BenchResult} from "../../extension/host/bench/benchMetrics.js";
import {runWorkloadOn, type Workload} from "../../extension/host/bench/runBenchmark.js";
import {arrivalTimesS, lengthBounds, makePrompt, requestLengths, type BenchRequest, type BenchTarget} from "../../extension/host/bench/workload.js";

type Send = {request: BenchRequest, sentMs: number, finishedMs?: number};

/** A target whose every request streams 2 tokens and finishes `durationMs` after its send; `cancel` ends it at once (abort). */
function fakeTarget(durationMs: number): BenchTarget<BenchResult> & {sends: Send[], maxInFlight: () => number} {
    const sends: Send[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    return {
        sends,
        maxInFlight: () => maxInFlight,
        send(request) {
            const send: Send = {request, sentMs: nowMs()};
            sends.push(send);
            maxInFlight = Math.max(maxInFlight, ++inFlight);
            let finish: (reason: "length" | "abort") => void = () => undefined;
            const done = new Promise<BenchResult>((resolve) => {
                const timer = setTimeout(() => finish("length"), durationMs);
                finish = (reason) => {
                    clearTimeout(timer);
                    if (send.finishedMs !== undefined)
                        return;
                    inFlight--;
                    const end = nowMs();
                    send.finishedMs = end;
                    resolve({reason, arrival: send.sentMs, lastDelivered: end, promptTokens: 4, generatedTokens: reason === "length" ? 2 : 0,
                        deliveries: reason === "length" ? [{t: (send.sentMs + end) / 2, tokens: 1}, {t: end, tokens: 1}] : []});
                };
            });
            return {done, cancel: () => finish("abort")};
        }
    };
}

const workload = (overrides: Partial<Workload>): Workload =>
    ({numPrompts: 6, inputLen: 4, outputLen: 2, maxConcurrency: Infinity, requestRate: Infinity, seed: 3, ...overrides});

describe("arrivalTimesS", () => {
    test("the first at 0, then exponential gaps −ln(1 − u)/rate of the seeded uniforms; all at 0 at an infinite rate", () => {
        const times = arrivalTimesS(new Xoshiro128(5), 4, 2);
        const uniforms = new Xoshiro128(5);
        const gaps = [1, 2, 3].map(() => -Math.log(1 - nextUnit(uniforms)) / 2);
        assert.equal(times[0], 0);
        assert.deepEqual(times, [0, gaps[0]!, gaps[0]! + gaps[1]!, gaps[0]! + gaps[1]! + gaps[2]!]);
        assert.deepEqual(arrivalTimesS(new Xoshiro128(5), 3, Infinity), [0, 0, 0]);
        const many = arrivalTimesS(new Xoshiro128(9), 4001, 4);
        const meanGap = many.at(-1)! / 4000;
        assert.ok(Math.abs(meanGap - 0.25) < 0.025, `mean gap ${meanGap} s at 4 requests/s`);
    });
});

describe("runWorkloadOn's schedule", () => {
    test("the first request is sent at t = 0, not after a first Poisson gap", async () => {
        const target = fakeTarget(1);
        const started = nowMs();
        // At 0.1 requests/s a first gap would be ~10 s on average.
        const run = await runWorkloadOn(target, workload({numPrompts: 1, requestRate: 0.1}));
        assert.equal(run.results.length, 1);
        assert.ok(target.sends[0]!.sentMs - started < 200, `first send after ${target.sends[0]!.sentMs - started} ms`);
        assert.ok(run.durationS < 0.5, `duration ${run.durationS} s`);
    });

    test("with a rate and max-concurrency 1, slow requests wait for the slot but the arrivals keep the Poisson schedule", async () => {
        const rate = 20;
        const durationMs = 400;
        // The same seeded workload without limits and with instant requests: arrivals at the schedule's times.
        const free = await runWorkloadOn(fakeTarget(1), workload({requestRate: rate}));
        const target = fakeTarget(durationMs);
        const run = await runWorkloadOn(target, workload({requestRate: rate, maxConcurrency: 1}));
        assert.equal(run.results.length, 6);
        assert.equal(target.maxInFlight(), 1);
        const offsets = (arrivals: number[]) => arrivals.map((t) => t - arrivals[0]!);
        const expected = offsets(free.arrivalsMs);
        const actual = offsets(run.arrivalsMs);
        // Pushed back by the slot, arrival i would come after i × 400 ms; the schedule spans ~250 ms.
        for (let i = 0; i < 6; i++)
            assert.ok(Math.abs(actual[i]! - expected[i]!) < 100, `arrival ${i}: ${actual[i]!.toFixed(1)} ms, scheduled ${expected[i]!.toFixed(1)} ms`);
        assert.ok(expected[5]! < 5 * durationMs - 200, `schedule ${expected.map((t) => t.toFixed(0)).join(", ")} ms`);
        for (let i = 0; i < 6; i++) {
            const send = target.sends[i]!;
            assert.equal(run.results[i]!.arrival, send.sentMs, "latencies count from the send");
            assert.ok(send.sentMs >= run.arrivalsMs[i]!);
            if (i > 0)
                assert.ok(send.sentMs >= target.sends[i - 1]!.finishedMs!, `request ${i} sent only when the slot was free`);
        }
        const metrics = computeBenchMetrics(run.results, run.durationS);
        const queue = computeClientQueueMetrics(run.results, run.arrivalsMs);
        assert.ok(metrics.p99_e2el_ms < durationMs + 150, `E2EL from the send, without the wait: ${metrics.p99_e2el_ms} ms`);
        assert.ok(queue.mean_client_queue_time_ms > durationMs, `mean wait for the slot ${queue.mean_client_queue_time_ms} ms`);
        assert.ok(run.durationS * 1000 >= 6 * durationMs);
    });

    test("warm-ups: copies of the first request sent first, at most max-concurrency at once, in no metric", async () => {
        const target = fakeTarget(50);
        const run = await runWorkloadOn(target, workload({numPrompts: 4, numWarmups: 3, maxConcurrency: 2}));
        const returnedMs = nowMs();
        assert.equal(target.sends.length, 7);
        assert.equal(target.maxInFlight(), 2);
        const firstMeasured = target.sends[3]!;
        for (const warmup of target.sends.slice(0, 3)) {
            assert.deepEqual(warmup.request, firstMeasured.request);
            assert.ok(warmup.finishedMs! <= firstMeasured.sentMs, "warm-ups finish before the measured run starts");
        }
        assert.equal(run.warmups.length, 3);
        assert.equal(run.results.length, 4);
        assert.deepEqual(run.results.map((r) => r.arrival), target.sends.slice(3).map((s) => s.sentMs));
        const metrics = computeBenchMetrics(run.results, run.durationS);
        assert.equal(metrics.completed, 4);
        assert.equal(metrics.total_input_tokens, 4 * 4);
        assert.equal(metrics.total_output_tokens, 4 * 2);
        const lastWarmupFinished = Math.max(...target.sends.slice(0, 3).map((s) => s.finishedMs!));
        assert.ok(run.durationS * 1000 <= returnedMs - lastWarmupFinished, "the duration starts after the warm-up");
    });

    test("an abort while requests wait for a slot: nothing more is sent, the one in flight is cancelled", async () => {
        const target = fakeTarget(5000);
        const abort = new AbortController();
        setTimeout(() => abort.abort(), 100);
        const started = nowMs();
        const run = await runWorkloadOn(target, workload({numPrompts: 5, maxConcurrency: 1}), undefined, abort.signal);
        assert.ok(nowMs() - started < 2000, "returns when aborted, not when the requests would have finished");
        assert.equal(target.sends.length, 1);
        assert.deepEqual(run.results.map((r) => r.reason), ["abort"]);
        assert.equal(run.arrivalsMs.length, 1);
    });
});

describe("--random-range-ratio (vLLM's): each request's own lengths", () => {
    test("lengths are uniform integers in [⌊len·(1−R)⌋, ⌈len·(1+R)⌉], output at least 1; R = 0 draws nothing", () => {
        assert.deepEqual(lengthBounds(64, 0.5), {low: 32, high: 96});
        assert.deepEqual(lengthBounds(7, 0.3), {low: 4, high: 10}); // ⌊4.9⌋, ⌈9.1⌉
        assert.deepEqual(lengthBounds(1, 0.9, 1), {low: 1, high: 2}); // ⌊0.1⌋ = 0 raised to the minimum 1
        const untouched = new Xoshiro128(4);
        assert.deepEqual(requestLengths(untouched, 3, 10, 20, 0), [{inputLen: 10, outputLen: 20}, {inputLen: 10, outputLen: 20}, {inputLen: 10, outputLen: 20}]);
        assert.equal(untouched.nextUint32(), new Xoshiro128(4).nextUint32(), "R = 0 leaves the stream where it was");

        const drawn = requestLengths(new Xoshiro128(8), 20_000, 64, 10, 0.5);
        const inputs = drawn.map((d) => d.inputLen);
        const outputs = drawn.map((d) => d.outputLen);
        assert.equal(Math.min(...inputs), 32);
        assert.equal(Math.max(...inputs), 96);
        assert.equal(Math.min(...outputs), 5);
        assert.equal(Math.max(...outputs), 15);
        assert.equal(new Set(outputs).size, 11, "every output length from 5 to 15 occurs");
        const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
        assert.ok(Math.abs(mean(inputs) - 64) < 0.5, `mean input ${mean(inputs)}`);
        assert.ok(Math.abs(mean(outputs) - 10) < 0.1, `mean output ${mean(outputs)}`);
    });

    test("runWorkloadOn sends each request its own output length; R = 0 sends the prompts it always did", async () => {
        const ranged = fakeTarget(1);
        await runWorkloadOn(ranged, workload({numPrompts: 40, inputLen: 6, outputLen: 10, rangeRatio: 0.5}));
        const maxTokens = ranged.sends.map((s) => s.request.maxTokens);
        assert.ok(maxTokens.every((n) => n >= 5 && n <= 15), maxTokens.join(","));
        assert.ok(new Set(maxTokens).size >= 5, `varied: ${maxTokens.join(",")}`);
        const words = ranged.sends.map((s) => s.request.prompt.split(" ").length);
        assert.ok(words.every((n) => n >= 3 && n <= 9) && new Set(words).size >= 3, words.join(","));

        // At R = 0 the prompts are the seeded stream's, exactly as before the option existed.
        const plain = fakeTarget(1);
        await runWorkloadOn(plain, workload({numPrompts: 3, inputLen: 5, outputLen: 2}));
        const rng = new Xoshiro128(3);
        assert.deepEqual(plain.sends.map((s) => s.request.prompt), [makePrompt(rng, 5), makePrompt(rng, 5), makePrompt(rng, 5)]);
        assert.deepEqual(plain.sends.map((s) => s.request.maxTokens), [2, 2, 2]);
    });
});
