import type {RequestResult} from "../engineClient/requestState.js";
import {percentile} from "../stats/percentiles.js";

/**
 * What the metrics read of one request: a RequestResult (the engine over IPC) or the HTTP client's own
 * record (openaiHttpTarget.ts). Times in ms on one clock; `deliveries` = chunks received with text.
 */
export type BenchResult = Pick<RequestResult, "reason" | "arrival" | "lastDelivered" | "promptTokens" | "generatedTokens" | "deliveries">;

/** vLLM's `--save-result` keys, measured client-side as vLLM's serving benchmark does. */
export type BenchMetrics = {
    completed: number,
    failed: number,
    duration: number,
    total_input_tokens: number,
    total_output_tokens: number,
    request_throughput: number,
    output_throughput: number,
    total_token_throughput: number,
    mean_ttft_ms: number, median_ttft_ms: number, p99_ttft_ms: number,
    mean_tpot_ms: number, median_tpot_ms: number, p99_tpot_ms: number,
    mean_itl_ms: number, median_itl_ms: number, p99_itl_ms: number,
    mean_e2el_ms: number, median_e2el_ms: number, p99_e2el_ms: number
};

function mean(values: readonly number[]): number {
    return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

/**
 * Client-side metrics like vLLM's benchmark: TTFT = first chunk − send; ITL = gaps between chunks
 * (a chunk carrying k tokens counts as one gap, as vLLM's streaming client sees it); TPOT = (e2el −
 * TTFT) / (output − 1) for requests with more than one token; e2el = last chunk − send. A request
 * counts as completed when it ended with `stop` or `length`.
 */
export function computeBenchMetrics(results: readonly BenchResult[], durationS: number): BenchMetrics {
    const ok = results.filter((r) => r.reason === "stop" || r.reason === "length");
    const ttfts: number[] = [];
    const tpots: number[] = [];
    const itls: number[] = [];
    const e2els: number[] = [];
    let input = 0;
    let output = 0;
    for (const r of ok) {
        input += r.promptTokens;
        output += r.generatedTokens;
        const sent = r.arrival;
        const e2el = r.lastDelivered - sent;
        e2els.push(e2el);
        const first = r.deliveries.find((d) => d.tokens > 0);
        if (first === undefined)
            continue;
        const ttft = first.t - sent;
        ttfts.push(ttft);
        if (r.generatedTokens > 1)
            tpots.push((e2el - ttft) / (r.generatedTokens - 1));
        let previous = first.t;
        for (const d of r.deliveries) {
            if (d.tokens === 0 || d.t <= first.t)
                continue;
            itls.push(d.t - previous);
            previous = d.t;
        }
    }
    const stats = (values: number[]) => ({mean: mean(values), median: percentile(values, 50), p99: percentile(values, 99)});
    const ttft = stats(ttfts);
    const tpot = stats(tpots);
    const itl = stats(itls);
    const e2el = stats(e2els);
    return {
        completed: ok.length,
        failed: results.length - ok.length,
        duration: durationS,
        total_input_tokens: input,
        total_output_tokens: output,
        request_throughput: ok.length / durationS,
        output_throughput: output / durationS,
        total_token_throughput: (input + output) / durationS,
        mean_ttft_ms: ttft.mean, median_ttft_ms: ttft.median, p99_ttft_ms: ttft.p99,
        mean_tpot_ms: tpot.mean, median_tpot_ms: tpot.median, p99_tpot_ms: tpot.p99,
        mean_itl_ms: itl.mean, median_itl_ms: itl.median, p99_itl_ms: itl.p99,
        mean_e2el_ms: e2el.mean, median_e2el_ms: e2el.median, p99_e2el_ms: e2el.p99
    };
}

/** vLLM's client-side queueing keys (reported with --max-concurrency): how long requests waited for a slot. */
export type ClientQueueMetrics = {mean_client_queue_time_ms: number, median_client_queue_time_ms: number, p99_client_queue_time_ms: number};

/**
 * vLLM's `client_queue_time` of the completed requests: send (`arrival`) − scheduled arrival
 * (`arrivalsMs[i]`, aligned with `results`); 0s when none completed.
 */
export function computeClientQueueMetrics(results: readonly BenchResult[], arrivalsMs: readonly number[]): ClientQueueMetrics {
    const waits = results.flatMap((r, i) => r.reason === "stop" || r.reason === "length" ? [r.arrival - arrivalsMs[i]!] : []);
    return {
        mean_client_queue_time_ms: mean(waits),
        median_client_queue_time_ms: percentile(waits, 50),
        p99_client_queue_time_ms: percentile(waits, 99)
    };
}

/** The table vLLM's serving benchmark prints; with `queue`, its "Client-side Queueing" section. */
export function formatBenchTable(m: BenchMetrics, queue?: ClientQueueMetrics): string {
    const line = (label: string, value: number | string) =>
        `${label.padEnd(40)}${typeof value === "number" ? value.toFixed(2).padStart(10) : String(value).padStart(10)}`;
    const section = (title: string) => title.padStart(25 + title.length / 2, "-").padEnd(50, "-");
    return [
        "============ Serving Benchmark Result ============",
        line("Successful requests:", String(m.completed)),
        line("Failed requests:", String(m.failed)),
        line("Benchmark duration (s):", m.duration),
        line("Total input tokens:", String(m.total_input_tokens)),
        line("Total generated tokens:", String(m.total_output_tokens)),
        line("Request throughput (req/s):", m.request_throughput),
        line("Output token throughput (tok/s):", m.output_throughput),
        line("Total Token throughput (tok/s):", m.total_token_throughput),
        section("Time to First Token"),
        line("Mean TTFT (ms):", m.mean_ttft_ms),
        line("Median TTFT (ms):", m.median_ttft_ms),
        line("P99 TTFT (ms):", m.p99_ttft_ms),
        section("Time per Output Token (excl. 1st token)"),
        line("Mean TPOT (ms):", m.mean_tpot_ms),
        line("Median TPOT (ms):", m.median_tpot_ms),
        line("P99 TPOT (ms):", m.p99_tpot_ms),
        section("Inter-token Latency"),
        line("Mean ITL (ms):", m.mean_itl_ms),
        line("Median ITL (ms):", m.median_itl_ms),
        line("P99 ITL (ms):", m.p99_itl_ms),
        section("End-to-end Latency"),
        line("Mean E2EL (ms):", m.mean_e2el_ms),
        line("Median E2EL (ms):", m.median_e2el_ms),
        line("P99 E2EL (ms):", m.p99_e2el_ms),
        ...(queue === undefined ? [] : [
            section("Client-side Queueing"),
            line("Mean Client Queue Time (ms):", queue.mean_client_queue_time_ms),
            line("Median Client Queue Time (ms):", queue.median_client_queue_time_ms),
            line("P99 Client Queue Time (ms):", queue.p99_client_queue_time_ms)
        ]),
        "=================================================="
    ].join("\n");
}
