/**
 * `npm run bench:peer -- [--json FILE] [--repeats N] [--quick] [--kernels-only] [--dtype f16|q8_0|q4_0] [--cpu-backend FILE]
 *     [--points 1,4,8,poisson] [--prefix-cache on|off|both] [--targets ipc,http] [--warmups N]`
 *
 * Us against llama.cpp's own server, side by side in one run: the same serving benchmark (the demo
 * `small` model, 32 prompts of ~48 tokens, exactly 64 output tokens each with ignore_eos, the bench's
 * temperature and seeds) against three targets:
 *
 * - `llama-server`: llama.cpp's server built by `.ci/build-llama-server.sh` from the llama.cpp source
 *   node-llama-cpp ships (so both run the same llama.cpp), benchmarked over HTTP on /v1/completions;
 * - `ipc`: our engine over IPC from this process (`runBenchmark`, stats on, as `inference-monitor bench`);
 * - `http`: our OpenAI endpoint (`inference-monitor serve`, its own process and engine child, stats on as
 *   always), benchmarked over HTTP on /v1/completions like llama-server.
 *
 * Same resources: 1 thread, 4 sequences of 4096 cells each (node-llama-cpp gives every sequence its own
 * contextSize cells; llama-server gets -c 4×4096 with a KV buffer per slot, so each slot has 4096), the
 * same sampling (temperature 0.8, top-k 40, top-p 0.95, min-p 0: node-llama-cpp's defaults; llama-server's
 * min-p default 0.05 is set to 0), flash attention `auto` on both, no speculative decoding. The model is the
 * demo `small` model's `textOnly` variant on every side: this llama-server version fails a completion whose
 * text is not valid UTF-8 (HTTP 500 "…does not match the expected Content-only format"), which the plain
 * demo model's random weights produce by sampling lone byte-fallback tokens; the variant never samples them.
 * Its weights are f16 (the issue's workload); `--dtype q8_0|q4_0` runs the same matrix on the same model
 * quantized, as users' GGUFs mostly are: node-llama-cpp's prebuilt CPU kernels prefill f16 weights at ~0.6×
 * llama-server's and quantized ones at par (see README, "kernel ceiling"), so the dtype decides how far the
 * kernels alone leave us behind.
 *
 * Load points: max concurrency 1, 4 and 8 (all requests at once), and Poisson arrivals near saturation
 * (0.9 × the IPC request throughput at concurrency 8, prefix cache on, from the first repeat). Prefix
 * cache on and off on every target: ours with `--prefix-cache on|off`; llama-server with its request field
 * `cache_prompt` (default true; `bench --no-cache-prompt` sends false). For llama-server "prompt cache on"
 * means its defaults in this version: the slot keeps its last prompt's KV cells and a request reuses the
 * common prefix (`cache_prompt`), a request goes to the idle slot whose prompt is most similar
 * (`--slot-prompt-similarity` 0.10), idle slots are saved to a host-RAM prompt cache (`--cache-ram` 8192
 * MiB, `--cache-idle-slots`) that later requests can restore from; `--cache-reuse` (KV shifting of
 * non-prefix chunks) stays 0 = off. Ours: the longest-prefix free sequence and its cached prefix, and the
 * prompt cache (`--prompt-cache`, 2048 MiB by default; saved sequence states, as `--cache-ram`). The random-word
 * prompts here share little more than their first token, so "on" mostly measures what the bookkeeping costs, not
 * what reuse saves (that is `npm run bench:prompt-cache`).
 *
 * Fair by construction: every run gets a fresh server or engine, loaded before the clock starts; each
 * repeat runs every load point × cache setting with the three targets in a rotating order (none always
 * first), the cache settings alternating; medians over repeats. Every run must have 0 failures and exactly
 * 32 × 64 output tokens as the server itself reports them (streamed `usage` on every HTTP response, and
 * each server's generated-token counter in /metrics), else the script stops with the details.
 * First, the kernel ceiling (scripts/kernelCeiling.ts): llama.cpp's kernels alone on each side, one
 * sequence, no serving loop — how far our prebuilt binaries are from llama-server's build before any
 * scheduling. `--kernels-only` measures just that.
 *
 * `--cpu-backend FILE` runs our side (the kernel ceiling, IPC and HTTP) on a CPU backend compiled here
 * (`bash scripts/build-cpu-backend.sh` prints its path) in place of node-llama-cpp's prebuilt one
 * (cpuBackendSwap.ts): a diagnostic that separates what the prebuilt binary costs from what our serving
 * loop costs. The product never does this.
 *
 * `--points`, `--prefix-cache` and `--targets` run part of the matrix (scripts/peerSelection.ts), so that more repeats
 * of one cell fit in the same time. With two repeats or more each cell also gets its per-repeat ratios' median and
 * interval (scripts/peerRatios.ts).
 * `--warmups N` sends every fresh server or engine N copies of the run's first request before its clock starts (the
 * bench's `--num-warmups`, at most the concurrency at once), so that a run measures a warmed-up server: V8's JIT in
 * `serve` and the host, llama-server's first-request costs. Default 0: the servers are measured from cold, as before.
 *
 * A benchmark, not a test: do not run it next to other measurements.
 */
import fs from "node:fs";
import {parseBenchArgs} from "../cli/benchArgs.js";
import {UsageError} from "../cli/commandLine.js";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {errorMessage} from "../common/errorMessage.js";
import {demoModelDtypes, ensureDemoModel} from "../engine/model/demoModel.js";
import type {BenchMetrics} from "../extension/host/bench/benchMetrics.js";
import type {HttpRequestResult} from "../extension/host/bench/openaiHttpTarget.js";
import {runBenchmark, runHttpBenchmark} from "../extension/host/bench/runBenchmark.js";
import {benchTemperature} from "../extension/host/bench/workload.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {describeKernelCeiling, measureKernelCeiling, type KernelCeiling} from "./kernelCeiling.js";
import {buildLlamaServer, killOnExit, llamaServerCounter, llamaServerVersion, servingArgs, startLlamaServer} from "./llamaServer.js";
import {startServe} from "./serveProcess.js";
import {isSwappableCpuBackend, swapCpuBackend} from "./cpuBackendSwap.js";
import {runOnEngineThreadpool} from "./engineThreadpool.js";
import {parsePeerSelection, peerTargets, type LoadPoint, type PeerSelection, type PeerTarget} from "./peerSelection.js";
import {describePairedRatios, pairedRatios, type PairedRatios} from "./peerRatios.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";

// Read before runOnEngineThreadpool: --help and usage errors end here, in this process; its child reads the same argv again.
const flags = readScriptCommandLine({
    name: "bench:peer",
    summary: "us against llama.cpp's llama-server: the same serving benchmark on llama-server, our engine over IPC and our serve over HTTP",
    options: {
        json: {type: "string", placeholder: "FILE", description: "also write the workload, the kernel ceiling and every run to FILE"},
        repeats: {type: "string", placeholder: "N", description: "repeats of the whole matrix, medians over them (default 3)"},
        quick: {type: "boolean",
            description: "one repeat of one cell, concurrency 4, prefix cache on, every target (in place of --repeats, --points, --prefix-cache, --targets)"},
        ["kernels-only"]: {type: "boolean", description: "measure only the kernel ceiling (llama.cpp's kernels alone on each side)"},
        dtype: {type: "string", placeholder: "D", description: `the demo model's weights: ${demoModelDtypes.join(" | ")} (default f16)`},
        ["cpu-backend"]: {type: "string", placeholder: "FILE",
            description: "run our side on this CPU backend (bash scripts/build-cpu-backend.sh) in place of the prebuilt one"},
        points: {type: "string", placeholder: "P,…",
            description: "load points: 1, 4, 8 (max concurrency), poisson (near saturation; needs 8) (default 1,4,8,poisson)"},
        ["prefix-cache"]: {type: "string", placeholder: "on|off|both", description: "prefix cache settings to run on every target (default both)"},
        targets: {type: "string", placeholder: "T,…",
            description: "our targets beside llama-server, which always runs: ipc, http (default ipc,http)"},
        warmups: {type: "string", placeholder: "N",
            description: "first send every fresh server or engine N copies of the run's first request (default 0: measured from cold)"}
    },
    details: "How it measures, and where we stand: README.md (\"Against llama-server: where we stand\") and this script's header."
}, (values) => {
    const quick = values.quick === true;
    const cpuBackend = values["cpu-backend"];
    if (cpuBackend !== undefined && !isSwappableCpuBackend(cpuBackend))
        throw new UsageError("--cpu-backend must be a CPU backend built by bash scripts/build-cpu-backend.sh (libggml-cpu-VARIANT.so, " +
            `a variant node-llama-cpp ships), got ${JSON.stringify(cpuBackend)}`);
    return {
        json: values.json, quick, kernelsOnly: values["kernels-only"] === true, cpuBackend,
        // --quick runs one repeat of one cell, in place of --repeats, --points, --prefix-cache and --targets.
        repeats: quick ? 1 : integerValue("repeats", values.repeats, 3, 1),
        dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16"),
        warmups: integerValue("warmups", values.warmups, 0, 0),
        selection: quick ? {points: [{concurrency: 4, rate: Infinity}], caches: [true], targets: [...peerTargets]} satisfies PeerSelection
            : parsePeerSelection({points: values.points ?? "1,4,8,poisson", prefixCache: values["prefix-cache"] ?? "both",
                targets: values.targets ?? "ipc,http"})
    };
});
const {quick, repeats, dtype, warmups, selection} = flags;

const workload = {model: `demo small (textOnly, ${dtype})`, numPrompts: 32, inputLen: 48, outputLen: 64, seed: 0, temperature: benchTemperature,
    threads: 1, parallel: 4, contextPerSequence: 4096, warmups};
/** llama-server's flags after `-m MODEL --host 127.0.0.1 --port P`. */
const llamaServerArgs = [...servingArgs(workload), "--min-p", "0", "--metrics"];
const engineArgs = ["--threads", String(workload.threads), "--parallel", String(workload.parallel)];

/** The kernel ceiling's prompt: plain words the demo tokenizer knows, more than 480 tokens of them. */
const kernelCeilingText = "once upon a time a little girl walked to the park with her dog and they played in the sun until it was late ".repeat(40);

const targets = selection.targets;
type Target = PeerTarget;

function benchArgs(point: LoadPoint, numPrompts = workload.numPrompts): string[] {
    return ["--num-prompts", String(numPrompts), "--input-len", String(workload.inputLen), "--output-len", String(workload.outputLen),
        "--seed", String(workload.seed), "--no-progress", ...(workload.warmups > 0 ? ["--num-warmups", String(workload.warmups)] : []),
        ...(point.concurrency !== undefined ? ["--max-concurrency", String(point.concurrency)] : []),
        ...(Number.isFinite(point.rate) ? ["--request-rate", String(point.rate)] : [])];
}

/** What a server generates for the warm-ups before a run's clock starts (its /metrics counts them). */
const warmupTokens = workload.warmups * workload.outputLen;

/** Throws unless the run is complete: 0 failures, every token there, the server's own counts. */
function check(label: string, metrics: BenchMetrics, expected: number, results?: readonly HttpRequestResult[]): void {
    const problems: string[] = [];
    if (metrics.failed > 0)
        problems.push(`${metrics.failed} failed (${[...new Set(results?.flatMap((r) => r.error ?? []))].slice(0, 3).join("; ")})`);
    if (metrics.total_output_tokens !== expected)
        problems.push(`${metrics.total_output_tokens} output tokens, expected ${expected}`);
    const withoutUsage = results?.filter((r) => !r.usage).length ?? 0;
    if (withoutUsage > 0)
        problems.push(`${withoutUsage} responses without usage (their tokens were counted as chunks)`);
    if (problems.length > 0)
        throw new Error(`${label}: ${problems.join("; ")}`);
}

async function ipcRun(modelPath: string, point: LoadPoint, prefixCache: boolean, numPrompts?: number): Promise<BenchMetrics> {
    const options = parseBenchArgs(["--model", modelPath, ...engineArgs, "--prefix-cache", prefixCache ? "on" : "off", "--stats", "on",
        ...benchArgs(point, numPrompts)], false);
    const run = await runBenchmark(options, {
        stderr: () => undefined,
        createStatsSession: async (client) => {
            const pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 3600});
            pipeline.attach(client);
            return pipeline;
        }
    });
    if (run.statsAgreement !== undefined && !run.statsAgreement.ok)
        throw new Error(`ipc: ${run.statsAgreement.detail}`);
    if (run.info.prefixCache !== prefixCache)
        throw new Error(`ipc: the engine runs with prefix cache ${run.info.prefixCache ? "on" : "off"}, asked for ${prefixCache ? "on" : "off"}`);
    check("ipc", run.metrics, options.numPrompts * workload.outputLen);
    return run.metrics;
}

async function httpRun(modelPath: string, point: LoadPoint, prefixCache: boolean, numPrompts?: number): Promise<BenchMetrics> {
    const server = await startServe(modelPath, [...engineArgs, "--prefix-cache", prefixCache ? "on" : "off", "--log-interval", "3600"],
        killOnExit);
    try {
        const options = parseBenchArgs(["--base-url", server.baseUrl, ...benchArgs(point, numPrompts)], false);
        const run = await runHttpBenchmark(options, options.http!, {stderr: () => undefined});
        const expected = options.numPrompts * workload.outputLen;
        check("http", run.metrics, expected, run.results);
        const metrics = await (await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/metrics`)).text();
        const served = Number(/^vllm:generation_tokens_total\{[^}]*\} (\d+)$/m.exec(metrics)?.[1]);
        if (served !== expected + warmupTokens)
            throw new Error(`http: the server counted ${served} generated tokens, expected ${expected + warmupTokens}`);
        return run.metrics;
    } finally {
        await server.stop();
    }
}

async function llamaRun(binary: string, modelPath: string, point: LoadPoint, prefixCache: boolean,
                        numPrompts?: number): Promise<BenchMetrics> {
    const server = await startLlamaServer({binary, model: modelPath, args: llamaServerArgs});
    try {
        const options = parseBenchArgs(["--base-url", server.baseUrl, ...(prefixCache ? [] : ["--no-cache-prompt"]),
            ...benchArgs(point, numPrompts)], false);
        const run = await runHttpBenchmark(options, options.http!, {stderr: () => undefined});
        const expected = options.numPrompts * workload.outputLen;
        check("llama-server", run.metrics, expected, run.results);
        const served = await llamaServerCounter(server.origin, "llamacpp:tokens_predicted_total");
        if (served !== expected + warmupTokens)
            throw new Error(`llama-server: its /metrics counted ${served} predicted tokens, expected ${expected + warmupTokens}`);
        return run.metrics;
    } finally {
        await server.stop();
    }
}

type Row = {concurrency: number | null, request_rate: number | "inf", prefix_cache: "on" | "off", target: Target, repeat: number,
    output_throughput: number, median_ttft_ms: number, p99_ttft_ms: number, median_itl_ms: number, p99_itl_ms: number,
    request_throughput: number, total_input_tokens: number};
type Ratio = {concurrency: number | null, request_rate: number | "inf", prefix_cache: "on" | "off", target: Target,
    throughput_ratio: number, ttft_ratio: number, p99_itl_ratio: number};

const pointLabel = (point: LoadPoint): string =>
    `${point.concurrency !== undefined ? `c=${point.concurrency}` : "no concurrency limit"}, rate ${Number.isFinite(point.rate) ? `${point.rate} req/s (Poisson)` : "inf"}`;
const cacheName = (on: boolean): "on" | "off" => on ? "on" : "off";
const sameCell = (point: LoadPoint, cache: boolean) => (row: Row): boolean =>
    row.concurrency === (point.concurrency ?? null) && row.request_rate === (Number.isFinite(point.rate) ? point.rate : "inf") &&
    row.prefix_cache === cacheName(cache);

function elapsed(startMs: number): string {
    const s = Math.round((performance.now() - startMs) / 1000);
    return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

/** The cell's medians over repeats per target, a table, and the ratios ours / llama-server. */
function summarize(rows: readonly Row[], point: LoadPoint, cache: boolean): {table: string, ratios: Ratio[], paired: PairedRatios[]} {
    const cell = rows.filter(sameCell(point, cache));
    const median = (target: Target, key: "output_throughput" | "median_ttft_ms" | "p99_ttft_ms" | "median_itl_ms" | "p99_itl_ms"): number =>
        percentile(cell.filter((r) => r.target === target).map((r) => r[key]), 50);
    const lines = [`${pointLabel(point)} · prefix cache ${cacheName(cache)} · medians over ${repeats} repeat${repeats > 1 ? "s" : ""}`,
        `  ${"target".padEnd(14)}${["out tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"].map((h) => h.padStart(11)).join("")}`];
    const latencies = ["median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms"] as const;
    for (const target of targets)
        lines.push(`  ${target.padEnd(14)}${median(target, "output_throughput").toFixed(1).padStart(11)}` +
            latencies.map((key) => `${median(target, key).toFixed(2)} ms`.padStart(11)).join(""));
    const ours = targets.filter((target) => target !== "llama-server");
    const ratios = ours.map((target): Ratio => ({
        concurrency: point.concurrency ?? null, request_rate: Number.isFinite(point.rate) ? point.rate : "inf", prefix_cache: cacheName(cache), target,
        throughput_ratio: median(target, "output_throughput") / median("llama-server", "output_throughput"),
        ttft_ratio: median(target, "median_ttft_ms") / median("llama-server", "median_ttft_ms"),
        p99_itl_ratio: median(target, "p99_itl_ms") / median("llama-server", "p99_itl_ms")
    }));
    lines.push(`  ours / llama-server: ${ratios.map((r) => `${r.target} throughput ${r.throughput_ratio.toFixed(3)}, TTFT p50 ${r.ttft_ratio.toFixed(3)}, ` +
        `ITL p99 ${r.p99_itl_ratio.toFixed(3)}`).join(" · ")}`);
    const paired = repeats < 2 ? [] : ours.flatMap((target) => pairedRatios(cell, target) ?? []);
    lines.push(...paired.map((p) => `  ${describePairedRatios(p)}`));
    return {table: lines.join("\n"), ratios, paired};
}

async function main(): Promise<void> {
    const cpuBackend = flags.cpuBackend;
    const restorePrebuilt = cpuBackend !== undefined ? swapCpuBackend(cpuBackend) : undefined;
    try {
        await compare(cpuBackend);
    } finally {
        restorePrebuilt?.();
    }
}

async function compare(cpuBackend: string | undefined): Promise<void> {
    const modelPath = await ensureDemoModel({size: "small", textOnly: true, dtype});
    const binary = await buildLlamaServer();
    const version = llamaServerVersion(binary);
    // A Poisson point's rate is NaN until the first repeat's c=8 IPC run sets it.
    const points: LoadPoint[] = selection.points;
    const caches = selection.caches;
    console.log(`workload: ${workload.numPrompts} prompts, input ~${workload.inputLen}, output ${workload.outputLen} (ignore_eos), temperature ` +
        `${workload.temperature}, seed ${workload.seed}; ${workload.model} (${modelPath}); ${workload.threads} thread, ${workload.parallel} sequences × ` +
        `${workload.contextPerSequence} cells; ${repeats} repeat${repeats > 1 ? "s" : ""}, a fresh server/engine per run` +
        `${workload.warmups > 0 ? `, each first sent ${workload.warmups} warm-up request${workload.warmups > 1 ? "s" : ""}` : ""}`);
    console.log(`llama-server ${version}: ${binary} -m MODEL --host 127.0.0.1 --port P ${llamaServerArgs.join(" ")}; ` +
        "prefix cache off: cache_prompt: false in every request");
    if (cpuBackend !== undefined)
        console.log(`ours: node-llama-cpp on ${cpuBackend}, a CPU backend compiled here, not its prebuilt one (a diagnostic)`);

    const ceiling: KernelCeiling = await measureKernelCeiling({binary, modelPath, threads: workload.threads,
        text: kernelCeilingText, promptTokens: 480, outputTokens: 64, repeats: 5, temperature: workload.temperature});
    console.log(describeKernelCeiling(ceiling));
    if (flags.kernelsOnly) {
        if (flags.json !== undefined)
            fs.writeFileSync(flags.json, JSON.stringify({model: workload.model, model_path: modelPath, cpu_backend: cpuBackend ?? "prebuilt",
                kernel_ceiling: ceiling}, null, 2) + "\n");
        return;
    }

    const started = performance.now();
    // Warm-up (page cache, JIT, the binaries), not counted.
    const warm: LoadPoint = {concurrency: 4, rate: Infinity};
    await llamaRun(binary, modelPath, warm, true, 8);
    if (targets.includes("ipc"))
        await ipcRun(modelPath, warm, true, 8);
    if (targets.includes("http"))
        await httpRun(modelPath, warm, true, 8);
    console.error(`warm-up done (${elapsed(started)})`);

    const rows: Row[] = [];
    const failures: Array<Omit<Row, "output_throughput" | "median_ttft_ms" | "p99_ttft_ms" | "median_itl_ms" | "p99_itl_ms" |
        "request_throughput" | "total_input_tokens"> & {error: string}> = [];
    const total = repeats * points.length * caches.length * targets.length;
    for (let repeat = 0; repeat < repeats; repeat++)
        for (const [pointIndex, point] of points.entries()) {
            if (Number.isNaN(point.rate)) {
                // IPC's (or, without it, HTTP's) run at c=8 with the first cache setting, both before this point in repeat 1.
                const base = targets.includes("ipc") ? "ipc" : "http";
                const c8 = rows.find((r) => r.repeat === 0 && r.target === base && r.concurrency === 8 &&
                    r.prefix_cache === cacheName(caches[0]!));
                point.rate = Math.round(0.9 * c8!.request_throughput * 100) / 100;
                console.log(`Poisson load point: 0.9 × ${base.toUpperCase()}'s request throughput at c=8, prefix cache ${c8!.prefix_cache}, repeat 1 ` +
                    `(${c8!.request_throughput.toFixed(2)} req/s) = ${point.rate} req/s, no concurrency limit`);
            }
            for (const cache of repeat % 2 === 0 ? caches : [...caches].reverse()) {
                // Each cell's order rotates by one per repeat (over 3 repeats every target goes first once); neighbouring cells differ.
                const shift = repeat + 2 * pointIndex + (cache ? 0 : 1);
                const order = targets.map((_, i) => targets[(i + shift) % targets.length]!);
                for (const target of order) {
                    const run = (): Promise<BenchMetrics> => target === "llama-server" ? llamaRun(binary, modelPath, point, cache)
                        : target === "ipc" ? ipcRun(modelPath, point, cache) : httpRun(modelPath, point, cache);
                    // A run that fails (a dropped connection, a crashed server) is reported and run once more on a fresh
                    // server; a second failure stops the benchmark.
                    let metrics: BenchMetrics;
                    try {
                        metrics = await run();
                    } catch (error) {
                        const detail = errorMessage(error);
                        failures.push({repeat, concurrency: point.concurrency ?? null, request_rate: Number.isFinite(point.rate) ? point.rate : "inf",
                            prefix_cache: cacheName(cache), target, error: detail});
                        console.error(`run failed, retrying once on a fresh server: ${detail}`);
                        metrics = await run();
                    }
                    rows.push({concurrency: point.concurrency ?? null, request_rate: Number.isFinite(point.rate) ? point.rate : "inf",
                        prefix_cache: cacheName(cache), target, repeat, output_throughput: metrics.output_throughput,
                        median_ttft_ms: metrics.median_ttft_ms, p99_ttft_ms: metrics.p99_ttft_ms, median_itl_ms: metrics.median_itl_ms,
                        p99_itl_ms: metrics.p99_itl_ms, request_throughput: metrics.request_throughput,
                        total_input_tokens: metrics.total_input_tokens});
                    console.error(`[${rows.length}/${total} ${elapsed(started)}] repeat ${repeat + 1} · ${pointLabel(point)} · prefix cache ` +
                        `${cacheName(cache)} · ${target}${order[0] === target ? " (first)" : ""}: ${metrics.output_throughput.toFixed(1)} out tok/s, ` +
                        `TTFT p50 ${metrics.median_ttft_ms.toFixed(1)} ms, ITL p50 ${metrics.median_itl_ms.toFixed(2)} ms, ` +
                        `${metrics.total_input_tokens} prompt tokens`);
                }
            }
        }

    const inputTokens = new Map(targets.map((target) =>
        [target, [...new Set(rows.filter((r) => r.target === target).map((r) => r.total_input_tokens))]]));
    console.log(`\nprompt tokens per run (the servers' own counts): ${targets.map((t) => `${t} ${inputTokens.get(t)!.join("/")}`).join(", ")}\n`);
    const ratios: Ratio[] = [];
    const pairedRatioRows: Array<{concurrency: number | null, request_rate: number | "inf", prefix_cache: "on" | "off"} & PairedRatios> = [];
    for (const point of points)
        for (const cache of caches) {
            const summary = summarize(rows, point, cache);
            console.log(`${summary.table}\n`);
            ratios.push(...summary.ratios);
            pairedRatioRows.push(...summary.paired.map((p) => ({concurrency: point.concurrency ?? null,
                request_rate: Number.isFinite(point.rate) ? point.rate : "inf" as const, prefix_cache: cacheName(cache), ...p})));
        }
    if (failures.length > 0)
        console.log(`${failures.length} run(s) failed once and were run again: ${failures.map((f) => `${f.target} (${f.error})`).join("; ")}`);
    if (flags.json !== undefined) {
        const poisson = points.find((p) => p.concurrency === undefined);
        fs.writeFileSync(flags.json, JSON.stringify({
            workload: {model: workload.model, model_path: modelPath, num_prompts: workload.numPrompts, input_len: workload.inputLen,
                output_len: workload.outputLen, seed: workload.seed, temperature: workload.temperature, threads: workload.threads,
                parallel: workload.parallel, context_per_sequence: workload.contextPerSequence, warmups: workload.warmups,
                repeats, quick, targets,
                prefix_cache: caches.map(cacheName),
                poisson_rate: poisson?.rate ?? null,
                load_points: points.map((p) => ({concurrency: p.concurrency ?? null, request_rate: Number.isFinite(p.rate) ? p.rate : "inf"})),
                llama_server: {binary, version, args: ["-m", "MODEL", "--host", "127.0.0.1", "--port", "P", ...llamaServerArgs],
                    prefix_cache_off: "cache_prompt: false in every request"},
                ours: {engine_args: engineArgs, prefix_cache_off: "--prefix-cache off", cpu_backend: cpuBackend ?? "prebuilt"}},
            kernel_ceiling: ceiling,
            results: rows,
            ratios,
            paired_ratios: pairedRatioRows,
            failed_runs: failures
        }, null, 2) + "\n");
        console.log(`wrote ${flags.json}`);
    }
}

// The kernel ceiling's node-llama-cpp runs in this process: on the engine's libuv pool size, as the engine does.
runOnEngineThreadpool(main);
