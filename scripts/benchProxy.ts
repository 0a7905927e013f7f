/**
 * `npm run bench:proxy -- [--pairs N] [--json FILE]`
 *
 * What the monitoring proxy adds: the same serving benchmark (32 prompts, 48 in / 64 out, max
 * concurrency 4) against llama.cpp's `llama-server` (demo `small` text-only model, 1 thread, 4 slots;
 * built by `bash .ci/build-llama-server.sh`) directly and through `inference-monitor proxy` (its own
 * process, as a user runs it), as interleaved pairs on the same server, so machine noise hits both
 * alike. `cache_prompt: false` on both sides (the seeded prompts repeat, and llama-server would serve
 * the later runs from its cache). Prints per-pair numbers and the medians: output throughput
 * proxy/direct and median TTFT proxy − direct (ms), each with its 95 % order-statistic interval
 * (medianInterval.ts). A benchmark, not a test.
 */
import {spawn} from "node:child_process";
import fs from "node:fs";
import {parseBenchArgs} from "../cli/benchArgs.js";
import {integerValue} from "../cli/optionValues.js";
import {bundledEntryPath} from "../engine/bundlePaths.js";
import {ensureDemoModel} from "../engine/model/demoModel.js";
import type {BenchMetrics} from "../extension/host/bench/benchMetrics.js";
import {runHttpBenchmark} from "../extension/host/bench/runBenchmark.js";
import {formatMedianInterval, medianInterval} from "../extension/host/bench/medianInterval.js";
import {buildLlamaServer, killOnExit, servingArgs, startLlamaServer} from "./llamaServer.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";

const values = readScriptCommandLine({
    name: "bench:proxy",
    summary: "what the monitoring proxy adds: the serving benchmark against llama-server directly and through proxy, interleaved pairs",
    options: {
        "pairs": {type: "string", placeholder: "N", description: "direct + proxied pairs, after one warm-up pair (default 5)"},
        "num-prompts": {type: "string", placeholder: "N", description: "requests per run, 48 in / 64 out, max concurrency 4 (default 32)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the medians and every pair to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"The monitoring proxy\") and this script's header. " +
        "Needs llama-server (bash .ci/build-llama-server.sh)."
}, (given) => ({
    "pairs": integerValue("pairs", given.pairs, 5, 1),
    // Passed on to the bench's own flags (cli/benchArgs.ts), checked here as it checks them.
    "num-prompts": String(integerValue("num-prompts", given["num-prompts"], 32, 1)),
    "json": given.json
}));

const workload = ["--num-prompts", values["num-prompts"], "--input-len", "48", "--output-len", "64", "--max-concurrency", "4",
    "--no-progress", "--no-cache-prompt"];
const expectedOutputTokens = Number(values["num-prompts"]) * 64;

async function run(baseUrl: string): Promise<BenchMetrics> {
    const options = parseBenchArgs(["--base-url", baseUrl, ...workload], false);
    const {metrics} = await runHttpBenchmark(options, options.http!, {stderr: () => undefined});
    if (metrics.failed > 0 || metrics.total_output_tokens !== expectedOutputTokens)
        throw new Error(`${baseUrl}: ${metrics.failed} failed, ${metrics.total_output_tokens} output tokens (expected ${expectedOutputTokens})`);
    return metrics;
}

async function startProxy(upstream: string): Promise<{baseUrl: string, stop: () => Promise<void>}> {
    const child = spawn(process.execPath, [bundledEntryPath("cli.js"), "proxy", "--upstream", upstream, "--port", "0", "--monitor-port", "0",
        "--log-interval", "0"], {stdio: ["ignore", "pipe", "inherit"]});
    killOnExit(child);
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    const baseUrl = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
            out += chunk;
            const url = /Proxy: (http:\S+\/v1)/.exec(out)?.[1];
            if (url !== undefined) resolve(url);
        });
        void exited.then(() => reject(new Error(`proxy exited: ${out}`)));
    });
    return {baseUrl, stop: async () => {
        child.kill("SIGINT");
        await exited;
    }};
}

async function main(): Promise<void> {
    const model = await ensureDemoModel({size: "small", textOnly: true});
    const server = await startLlamaServer({binary: await buildLlamaServer(), model,
        args: servingArgs({threads: 1, parallel: 4, contextPerSequence: 4096})});
    const proxy = await startProxy(server.origin);
    try {
        console.log(`${values["num-prompts"]} prompts, 48 in / 64 out, max concurrency 4, llama-server ${server.baseUrl}, proxy ${proxy.baseUrl}`);
        await run(server.baseUrl); // warm-up
        await run(proxy.baseUrl);
        const rows: Array<{direct: BenchMetrics, proxied: BenchMetrics}> = [];
        for (let i = 0; i < values.pairs; i++) {
            const first = i % 2 === 0 ? "direct" : "proxy";
            const a = await run(first === "direct" ? server.baseUrl : proxy.baseUrl);
            const b = await run(first === "direct" ? proxy.baseUrl : server.baseUrl);
            const pair = first === "direct" ? {direct: a, proxied: b} : {direct: b, proxied: a};
            rows.push(pair);
            console.log(`pair ${i + 1} (${first} first): output tok/s direct ${pair.direct.output_throughput.toFixed(1)} proxy ` +
                `${pair.proxied.output_throughput.toFixed(1)} (ratio ${(pair.proxied.output_throughput / pair.direct.output_throughput).toFixed(3)}) · ` +
                `median TTFT direct ${pair.direct.median_ttft_ms.toFixed(2)} ms proxy ${pair.proxied.median_ttft_ms.toFixed(2)} ms · ` +
                `median ITL direct ${pair.direct.median_itl_ms.toFixed(2)} ms proxy ${pair.proxied.median_itl_ms.toFixed(2)} ms`);
        }
        const ratio = medianInterval(rows.map((r) => r.proxied.output_throughput / r.direct.output_throughput));
        const ttftDiff = medianInterval(rows.map((r) => r.proxied.median_ttft_ms - r.direct.median_ttft_ms));
        const itlDiff = medianInterval(rows.map((r) => r.proxied.median_itl_ms - r.direct.median_itl_ms));
        console.log(`medians over ${rows.length} pairs: output throughput proxy/direct ${formatMedianInterval(ratio)} (target ≥ 0.99), ` +
            `median TTFT proxy − direct ${formatMedianInterval(ttftDiff, 2)} ms (target ≤ 1), median ITL proxy − direct ${formatMedianInterval(itlDiff, 2)} ms`);
        if (values.json !== undefined) {
            // Each median with its distribution-free confidence interval (medianInterval.ts).
            const report = {pairs: rows.length, throughput_ratio: ratio.median, ttft_diff_ms: ttftDiff.median, itl_diff_ms: itlDiff.median,
                throughput_ratio_interval: ratio, ttft_diff_ms_interval: ttftDiff, itl_diff_ms_interval: itlDiff, rows};
            fs.writeFileSync(values.json, JSON.stringify(report, null, 2) + "\n");
        }
    } finally {
        await proxy.stop();
        await server.stop();
    }
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
