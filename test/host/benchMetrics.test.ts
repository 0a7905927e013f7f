/**
 * The benchmark's client-side metrics against values computed by hand (vLLM's `calculate_metrics`:
 * TTFT, TPOT = (e2el − ttft)/(n − 1), ITL, E2EL; means; numpy's linear-interpolation percentiles),
 * failed requests left out, and the client-side queueing of `--max-concurrency`.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {computeBenchMetrics, computeClientQueueMetrics, formatBenchTable, type BenchMetrics, type BenchResult} from "../../extension/host/bench/benchMetrics.js";

function assertClose(actual: number, expected: number, what: string): void {
    assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual}, expected ${expected}`);
}

function assertMetrics(actual: BenchMetrics, expected: BenchMetrics): void {
    for (const key of Object.keys(expected) as Array<keyof BenchMetrics>)
        assertClose(actual[key], expected[key], key);
}

/** 5 tokens: a role chunk without text, then chunks of 1, 1, 2 and 1 token; the stream ends 10 ms after the last. */
const fiveTokens: BenchResult = {reason: "length", arrival: 1000, promptTokens: 10, generatedTokens: 5, lastDelivered: 1210,
    deliveries: [{t: 1050, tokens: 0}, {t: 1100, tokens: 1}, {t: 1130, tokens: 1}, {t: 1170, tokens: 2}, {t: 1200, tokens: 1}]};
/** 2 tokens, stopped. */
const twoTokens: BenchResult = {reason: "stop", arrival: 2000, promptTokens: 20, generatedTokens: 2, lastDelivered: 2100,
    deliveries: [{t: 2040, tokens: 1}, {t: 2100, tokens: 1}]};
/** 1 token: a TTFT and an E2EL, no TPOT, no ITL. */
const oneToken: BenchResult = {reason: "length", arrival: 3000, promptTokens: 30, generatedTokens: 1, lastDelivered: 3300,
    deliveries: [{t: 3300, tokens: 1}]};
const failed: BenchResult = {reason: "error", arrival: 4000, promptTokens: 40, generatedTokens: 1, lastDelivered: 4500, deliveries: [{t: 4010, tokens: 1}]};
const aborted: BenchResult = {reason: "abort", arrival: 5000, promptTokens: 50, generatedTokens: 3, lastDelivered: 5020, deliveries: [{t: 5020, tokens: 3}]};

describe("computeBenchMetrics", () => {
    test("TTFT, TPOT, ITL, E2EL, totals and throughputs by hand; failed and aborted requests left out", () => {
        // Completed: fiveTokens, twoTokens, oneToken (in any order: percentiles do not depend on it).
        //   TTFT (first chunk with tokens − send): 1100−1000 = 100, 2040−2000 = 40, 3300−3000 = 300
        //   E2EL (last chunk − send):               1210−1000 = 210, 2100−2000 = 100, 3300−3000 = 300
        //   TPOT = (E2EL − TTFT)/(n − 1):           (210−100)/4 = 27.5, (100−40)/1 = 60; none for 1 token
        //   ITL (gaps between chunks with tokens):  30, 40, 30 (the 2-token chunk is one gap); 60
        // numpy.percentile, linear: rank (n − 1)·p/100 between the sorted values.
        //   TTFT sorted 40, 100, 300: median = 100; p99 at rank 1.98 = 100 + 0.98·200 = 296; mean 440/3
        //   TPOT sorted 27.5, 60: median at rank 0.5 = 43.75; p99 at rank 0.99 = 27.5 + 0.99·32.5 = 59.675; mean 43.75
        //   ITL sorted 30, 30, 40, 60: median at rank 1.5 = 35; p99 at rank 2.97 = 40 + 0.97·20 = 59.4; mean 160/4 = 40
        //   E2EL sorted 100, 210, 300: median 210; p99 at rank 1.98 = 210 + 0.98·90 = 298.2; mean 610/3
        // Totals: input 10+20+30 = 60, output 5+2+1 = 8; over 4 s: 0.75 req/s, 2 tok/s, 68/4 = 17 tok/s.
        const metrics = computeBenchMetrics([failed, fiveTokens, aborted, twoTokens, oneToken], 4);
        assertMetrics(metrics, {
            completed: 3, failed: 2, duration: 4, total_input_tokens: 60, total_output_tokens: 8,
            request_throughput: 0.75, output_throughput: 2, total_token_throughput: 17,
            mean_ttft_ms: 440 / 3, median_ttft_ms: 100, p99_ttft_ms: 296,
            mean_tpot_ms: 43.75, median_tpot_ms: 43.75, p99_tpot_ms: 59.675,
            mean_itl_ms: 40, median_itl_ms: 35, p99_itl_ms: 59.4,
            mean_e2el_ms: 610 / 3, median_e2el_ms: 210, p99_e2el_ms: 298.2
        });
    });

    test("percentiles are numpy's linear interpolation: TTFTs 4, 1, 3, 2 ms give p50 2.5 and p99 3.97", () => {
        // Sorted 1, 2, 3, 4: p50 at rank 1.5 = 2.5; p99 at rank 2.97 = 3 + 0.97·1 = 3.97; mean 2.5.
        const results = [4, 1, 3, 2].map((ttft, i): BenchResult => ({reason: "length", arrival: i * 100, promptTokens: 1, generatedTokens: 1,
            lastDelivered: i * 100 + ttft, deliveries: [{t: i * 100 + ttft, tokens: 1}]}));
        const metrics = computeBenchMetrics(results, 1);
        assertClose(metrics.median_ttft_ms, 2.5, "median");
        assertClose(metrics.p99_ttft_ms, 3.97, "p99");
        assertClose(metrics.mean_ttft_ms, 2.5, "mean");
        assertClose(metrics.p99_e2el_ms, 3.97, "E2EL = TTFT for one token");
        // One token each: no TPOT and no ITL, reported as 0 as vLLM's `np.mean(x or 0)`.
        assert.deepEqual([metrics.mean_tpot_ms, metrics.p99_tpot_ms, metrics.mean_itl_ms, metrics.p99_itl_ms], [0, 0, 0, 0]);
    });

    test("a single value is every percentile; no completed request gives zeros, not NaN", () => {
        const single = computeBenchMetrics([twoTokens], 2);
        assert.deepEqual([single.mean_e2el_ms, single.median_e2el_ms, single.p99_e2el_ms], [100, 100, 100]);
        assert.deepEqual([single.mean_tpot_ms, single.median_tpot_ms, single.p99_tpot_ms], [60, 60, 60]);
        assert.equal(single.output_throughput, 1);
        const none = computeBenchMetrics([failed, aborted], 2);
        assert.equal(none.completed, 0);
        assert.equal(none.failed, 2);
        assert.equal(none.total_output_tokens, 0);
        for (const [key, value] of Object.entries(none))
            assert.ok(Number.isFinite(value), `${key}: ${value}`);
        assert.equal(none.median_ttft_ms, 0);
        assert.equal(none.p99_e2el_ms, 0);
    });
});

describe("computeClientQueueMetrics", () => {
    test("send − scheduled arrival of the completed requests, by hand; in the table only when given", () => {
        // Waits: 1000−990 = 10, 2000−2000 = 0, 3000−2900 = 100; the failed request's 50 is left out.
        // Sorted 0, 10, 100: median 10; p99 at rank 1.98 = 10 + 0.98·90 = 98.2; mean 110/3.
        const queue = computeClientQueueMetrics([fiveTokens, twoTokens, failed, oneToken], [990, 2000, 3950, 2900]);
        assertClose(queue.mean_client_queue_time_ms, 110 / 3, "mean");
        assertClose(queue.median_client_queue_time_ms, 10, "median");
        assertClose(queue.p99_client_queue_time_ms, 98.2, "p99");
        const metrics = computeBenchMetrics([fiveTokens], 1);
        assert.doesNotMatch(formatBenchTable(metrics), /Client Queue/);
        assert.match(formatBenchTable(metrics, queue), /-+Client-side Queueing-+\nMean Client Queue Time \(ms\): +36\.67\nMedian Client Queue Time \(ms\): +10\.00\nP99 Client Queue Time \(ms\): +98\.20\n=+$/);
    });
});
