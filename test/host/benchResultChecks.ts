/**
 * Checks of a `bench --json` result and the table printed with it (shared by the CLI tests over IPC and
 * over HTTP): every metric a finite number, and the relations that hold between them.
 */
import assert from "node:assert/strict";

const latencies = ["ttft", "tpot", "itl", "e2el"] as const;
export const benchResultKeys = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "output_throughput", "total_token_throughput", ...latencies.flatMap((m) => [`mean_${m}_ms`, `median_${m}_ms`, `p99_${m}_ms`])];
const clientQueueKeys = ["mean_client_queue_time_ms", "median_client_queue_time_ms", "p99_client_queue_time_ms"];

function assertRatio(actual: number, numerator: number, denominator: number, what: string): void {
    const expected = numerator / denominator;
    assert.ok(Math.abs(actual - expected) <= 1e-9 * Math.max(1, expected), `${what}: ${actual}, expected ${numerator}/${denominator} = ${expected}`);
}

/**
 * `result` (parsed JSON) of a run of `numPrompts` requests of exactly `outputLen` tokens each (ignore_eos),
 * at most 100 latency values per metric (there the mean cannot exceed the p99), with `queue`: the
 * client-side queueing keys of --max-concurrency.
 */
export function assertBenchResult(result: Record<string, unknown>, workload: {numPrompts: number, outputLen: number, queue: boolean}): void {
    const keys = [...benchResultKeys, ...(workload.queue ? clientQueueKeys : [])];
    for (const key of keys)
        assert.ok(typeof result[key] === "number" && Number.isFinite(result[key]), `${key}: ${String(result[key])}`);
    if (!workload.queue)
        for (const key of clientQueueKeys)
            assert.equal(result[key], undefined, key);
    const n = (key: string): number => result[key] as number;
    for (const key of ["completed", "failed", "total_input_tokens", "total_output_tokens"])
        assert.ok(Number.isInteger(n(key)) && n(key) >= 0, `${key}: ${n(key)}`);
    assert.equal(n("completed") + n("failed"), workload.numPrompts, "completed + failed = the prompts sent");
    assert.equal(n("total_output_tokens"), n("completed") * workload.outputLen, "exact output lengths");
    assert.ok(n("duration") > 0);
    assertRatio(n("request_throughput"), n("completed"), n("duration"), "request_throughput");
    assertRatio(n("output_throughput"), n("total_output_tokens"), n("duration"), "output_throughput");
    assertRatio(n("total_token_throughput"), n("total_input_tokens") + n("total_output_tokens"), n("duration"), "total_token_throughput");
    if (n("completed") === 0)
        return;
    for (const m of latencies) {
        const [mean, median, p99] = [n(`mean_${m}_ms`), n(`median_${m}_ms`), n(`p99_${m}_ms`)];
        assert.ok(median > 0 && median <= p99, `${m}: 0 < median ${median} ≤ p99 ${p99}`);
        assert.ok(mean > 0 && mean <= p99, `${m}: 0 < mean ${mean} ≤ p99 ${p99}`);
    }
    // Per request TTFT ≤ E2EL, so the same holds for their means and for each order statistic.
    for (const stat of ["mean", "median", "p99"])
        assert.ok(n(`${stat}_ttft_ms`) <= n(`${stat}_e2el_ms`), `${stat} TTFT ≤ E2EL`);
    // Every request has outputLen tokens and TPOT = (E2EL − TTFT)/(outputLen − 1), so the means obey the same.
    const e2el = n("mean_ttft_ms") + (workload.outputLen - 1) * n("mean_tpot_ms");
    assert.ok(Math.abs(n("mean_e2el_ms") - e2el) < 1e-6 * e2el, `mean E2EL ${n("mean_e2el_ms")} = mean TTFT + (n − 1) · mean TPOT = ${e2el}`);
    if (workload.queue)
        assert.ok(n("mean_client_queue_time_ms") >= 0 && n("median_client_queue_time_ms") >= 0 &&
            n("median_client_queue_time_ms") <= n("p99_client_queue_time_ms"), "client queue times");
}

/** The table printed on stdout shows the JSON's values (2 decimals, counts as integers). */
export function assertTableMatches(stdout: string, result: Record<string, unknown>): void {
    const rows: Array<[string, string, boolean]> = [
        ["Successful requests:", "completed", true], ["Failed requests:", "failed", true], ["Benchmark duration (s):", "duration", false],
        ["Total input tokens:", "total_input_tokens", true], ["Total generated tokens:", "total_output_tokens", true],
        ["Request throughput (req/s):", "request_throughput", false], ["Output token throughput (tok/s):", "output_throughput", false],
        ["Total Token throughput (tok/s):", "total_token_throughput", false],
        ...latencies.flatMap((m): Array<[string, string, boolean]> => [["Mean", "mean"], ["Median", "median"], ["P99", "p99"]]
            .map(([label, key]) => [`${label} ${m.toUpperCase()} (ms):`, `${key}_${m}_ms`, false]))
    ];
    for (const [label, key, integer] of rows) {
        const value = result[key] as number;
        const printed = integer ? String(value) : value.toFixed(2);
        assert.match(stdout, new RegExp(`\\n${label.replace(/[()/]/g, "\\$&")} +${printed.replace(".", "\\.")}\\n`), `${label} ${printed}`);
    }
}
