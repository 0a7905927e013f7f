/**
 * `npm run bench:http -- [--pairs N] [--num-warmups N] [--json FILE]`
 *
 * What the OpenAI-compatible HTTP layer costs: the same serving benchmark (48 prompts, 64 in / 64 out,
 * max concurrency 4, the demo `small` model's `textOnly` variant, 1 thread, 4 sequences) through IPC (`runBenchmark`: this
 * process hosts the EngineClient, the engine runs in its child process) and through our /v1 endpoint
 * (`bench --base-url` from this process against `inference-monitor serve`, a separate process with its
 * own engine child, as a user runs it), as interleaved pairs, so machine noise hits both alike.
 *
 * The `textOnly` variant (the same weights and work per token) because the plain model samples byte-fallback
 * tokens whose bytes are part of a UTF-8 character: the API holds such a byte back until the character is
 * whole, so over HTTP two tokens arrive as one chunk, which the client sees as one longer ITL gap (and a
 * later first token when it is the first), while IPC delivers every token. Measured 2026-12-04: with the
 * plain model 16 requests × 64 tokens arrived as 900 text chunks (textOnly: 1024), and HTTP's median ITL
 * was 1.04 ms above IPC's over 15 pairs (95 % interval 0.77–1.28; textOnly: 0.09, −0.44–0.75).
 *
 * Fair by construction: every run gets a fresh engine (a new engine process, loaded before the clock
 * starts), the same engine options, stats on in the host on both sides (serve always runs its stats
 * pipeline; the IPC run attaches one), no log lines and no /metrics scrapes during the run. The HTTP
 * side pays for the extra process hop, JSON/SSE encoding and parsing: that is what is measured.
 * `--num-warmups N` (default 0, the workload): each side first sends N copies of the first request,
 * in no metric (vLLM's `--num-warmups`); over HTTP 4 of them open the client's kept-alive connections
 * before the clock starts. Without them the first wave's TCP connects spread its arrivals over ~15 ms
 * (traced: the first request reached the engine 6 ms before the second), and over HTTP the requests then
 * stay a step apart for the whole run, while over IPC the first wave arrives at once. With them, the copy
 * of the first request leaves its prompt in every sequence's prefix cache, which puts that request a step
 * ahead on both sides.
 * Each HTTP run's output tokens are checked against the server's `vllm:generation_tokens_total`.
 * Prints per-pair numbers and the medians: output throughput HTTP/IPC and median TTFT HTTP − IPC (ms), each
 * with its 95 % order-statistic interval (medianInterval.ts; fewer than 6 pairs give a wider one).
 * A benchmark, not a test.
 */
import fs from "node:fs";
import {parseBenchArgs} from "../cli/benchArgs.js";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {demoModelSizeNames, ensureDemoModel} from "../engine/model/demoModel.js";
import type {BenchMetrics} from "../extension/host/bench/benchMetrics.js";
import {formatMedianInterval, medianInterval} from "../extension/host/bench/medianInterval.js";
import {runBenchmark, runHttpBenchmark} from "../extension/host/bench/runBenchmark.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";
import {startServe} from "./serveProcess.js";


const values = readScriptCommandLine({
    name: "bench:http",
    summary: "what the OpenAI-compatible HTTP layer costs: the serving benchmark through IPC vs through serve's /v1, interleaved pairs",
    options: {
        "pairs": {type: "string", placeholder: "N", description: "IPC + HTTP pairs, after one warm-up pair (default 5)"},
        "num-prompts": {type: "string", placeholder: "N", description: "requests per run (default 48)"},
        "input-len": {type: "string", placeholder: "N", description: "prompt length in tokens, approximately (default 64)"},
        "output-len": {type: "string", placeholder: "N", description: "tokens generated per request (default 64)"},
        "max-concurrency": {type: "string", placeholder: "N", description: "most requests in flight (default 4)"},
        "num-warmups": {type: "string", placeholder: "N", description: "first send N copies of the first request, in no metric (default 0)"},
        "demo-size": {type: "string", placeholder: "SIZE", description: "the demo model, its textOnly variant: tiny | small | medium (default small)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the medians and every pair to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\") and this script's header."
}, (given) => ({
    "pairs": integerValue("pairs", given.pairs, 5, 1),
    // Passed on to the bench's own flags (cli/benchArgs.ts), checked here as it checks them.
    "num-prompts": String(integerValue("num-prompts", given["num-prompts"], 48, 1)),
    "input-len": String(integerValue("input-len", given["input-len"], 64, 1)),
    "output-len": String(integerValue("output-len", given["output-len"], 64, 1)),
    "max-concurrency": String(integerValue("max-concurrency", given["max-concurrency"], 4, 1)),
    "num-warmups": String(integerValue("num-warmups", given["num-warmups"], 0, 0)),
    "demo-size": choiceValue("demo-size", given["demo-size"], demoModelSizeNames, "small"),
    "json": given.json
}));

const engine = {threads: "1", parallel: "4"};
const workload = ["--num-prompts", values["num-prompts"], "--input-len", values["input-len"], "--output-len", values["output-len"],
    "--max-concurrency", values["max-concurrency"], "--num-warmups", values["num-warmups"], "--no-progress"];
const expectedOutputTokens = Number(values["num-prompts"]) * Number(values["output-len"]);

function check(side: string, metrics: BenchMetrics): void {
    if (metrics.failed > 0 || metrics.total_output_tokens !== expectedOutputTokens)
        throw new Error(`${side}: ${metrics.failed} failed, ${metrics.total_output_tokens} output tokens (expected ${expectedOutputTokens})`);
}

async function ipcRun(modelPath: string): Promise<BenchMetrics> {
    const options = parseBenchArgs(["--model", modelPath, "--threads", engine.threads, "--parallel", engine.parallel, "--stats", "on", ...workload], false);
    const run = await runBenchmark(options, {
        stderr: () => undefined,
        createStatsSession: async (client) => {
            const pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 3600});
            pipeline.attach(client);
            return pipeline;
        }
    });
    if (run.statsAgreement !== undefined && !run.statsAgreement.ok)
        throw new Error(run.statsAgreement.detail);
    return run.metrics;
}

async function generationTokensTotal(baseUrl: string): Promise<number> {
    const text = await (await fetch(`${baseUrl.replace(/\/v1$/, "")}/metrics`)).text();
    const match = /^vllm:generation_tokens_total\{[^}]*\} (\d+)$/m.exec(text);
    if (match === null)
        throw new Error("no vllm:generation_tokens_total in /metrics");
    return Number(match[1]);
}

async function httpRun(modelPath: string): Promise<BenchMetrics> {
    const server = await startServe(modelPath, ["--threads", engine.threads, "--parallel", engine.parallel, "--log-interval", "3600"]);
    try {
        const options = parseBenchArgs(["--base-url", server.baseUrl, ...workload], false);
        const run = await runHttpBenchmark(options, options.http!, {stderr: () => undefined});
        const served = await generationTokensTotal(server.baseUrl);
        const warmupTokens = Number(values["num-warmups"]) * Number(values["output-len"]);
        if (served !== run.metrics.total_output_tokens + warmupTokens)
            throw new Error(`the server counted ${served} generated tokens, the client ${run.metrics.total_output_tokens} (+ ${warmupTokens} in warm-ups)`);
        return run.metrics;
    } finally {
        await server.stop();
    }
}

type Pair = {ipc: BenchMetrics, http: BenchMetrics};

function row(pair: Pair): Record<string, number> {
    return {
        ipc_output_throughput: pair.ipc.output_throughput, http_output_throughput: pair.http.output_throughput,
        throughput_ratio: pair.http.output_throughput / pair.ipc.output_throughput,
        ipc_median_ttft_ms: pair.ipc.median_ttft_ms, http_median_ttft_ms: pair.http.median_ttft_ms,
        ttft_diff_ms: pair.http.median_ttft_ms - pair.ipc.median_ttft_ms,
        ipc_median_itl_ms: pair.ipc.median_itl_ms, http_median_itl_ms: pair.http.median_itl_ms,
        ipc_median_e2el_ms: pair.ipc.median_e2el_ms, http_median_e2el_ms: pair.http.median_e2el_ms
    };
}

async function main(): Promise<void> {
    const pairs = values.pairs;
    const size = values["demo-size"];
    // textOnly: the same weights and compute, but no byte-fallback token is ever sampled (see below).
    const modelPath = await ensureDemoModel({size, textOnly: true});
    console.log(`workload: ${values["num-prompts"]} prompts, input ${values["input-len"]}, output ${values["output-len"]}, ` +
        `max concurrency ${values["max-concurrency"]}, ${values["num-warmups"]} warm-ups; demo ${values["demo-size"]}, ${engine.threads} thread, ${engine.parallel} sequences; ` +
        "a fresh engine per run, stats on both sides");
    // Warm-up (page cache, JIT), not counted.
    check("warm-up ipc", await ipcRun(modelPath));
    check("warm-up http", await httpRun(modelPath));
    const rows: Array<Record<string, number>> = [];
    for (let i = 0; i < pairs; i++) {
        // Alternate which goes first so drift does not favour one side.
        const pair: Pair = i % 2 === 0
            ? {ipc: await ipcRun(modelPath), http: await httpRun(modelPath)}
            : await (async () => {
                const http = await httpRun(modelPath);
                return {ipc: await ipcRun(modelPath), http};
            })();
        check("ipc", pair.ipc);
        check("http", pair.http);
        const r = row(pair);
        rows.push(r);
        console.log(`pair ${i + 1}/${pairs} (${i % 2 === 0 ? "IPC first" : "HTTP first"}): output tok/s IPC ${r.ipc_output_throughput!.toFixed(1)} ` +
            `HTTP ${r.http_output_throughput!.toFixed(1)} (ratio ${r.throughput_ratio!.toFixed(3)}) · median TTFT IPC ${r.ipc_median_ttft_ms!.toFixed(1)} ms ` +
            `HTTP ${r.http_median_ttft_ms!.toFixed(1)} ms (diff ${r.ttft_diff_ms!.toFixed(1)} ms) · median ITL IPC ${r.ipc_median_itl_ms!.toFixed(2)} ms ` +
            `HTTP ${r.http_median_itl_ms!.toFixed(2)} ms`);
    }
    const median = (key: string): number => percentile(rows.map((r) => r[key]!), 50);
    const throughput = medianInterval(rows.map((r) => r.throughput_ratio!));
    const ttftDiff = medianInterval(rows.map((r) => r.ttft_diff_ms!));
    const summary = {
        median_output_throughput_ratio_http_ipc: throughput.median,
        median_ttft_diff_ms_http_minus_ipc: ttftDiff.median,
        median_ipc_output_throughput: median("ipc_output_throughput"),
        median_http_output_throughput: median("http_output_throughput"),
        // The medians' distribution-free confidence intervals (medianInterval.ts): whether a target is met or only touched.
        output_throughput_ratio_interval: throughput,
        ttft_diff_ms_interval: ttftDiff
    };
    console.log(`medians over ${pairs} pairs: output throughput HTTP/IPC ${formatMedianInterval(throughput)} ` +
        `(IPC ${summary.median_ipc_output_throughput.toFixed(1)} tok/s, HTTP ${summary.median_http_output_throughput.toFixed(1)} tok/s), ` +
        `median TTFT HTTP − IPC ${formatMedianInterval(ttftDiff, 1)} ms`);
    if (values.json !== undefined)
        fs.writeFileSync(values.json, JSON.stringify({pairs, workload: {numPrompts: values["num-prompts"], inputLen: values["input-len"],
            outputLen: values["output-len"], maxConcurrency: values["max-concurrency"], numWarmups: values["num-warmups"], model: values["demo-size"], ...engine}, ...summary, rows}, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
