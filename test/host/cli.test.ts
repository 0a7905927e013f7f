/**
 * The command line as a user runs it (the built dist/cli.js in a child process): the serving
 * benchmark end to end in both modes with stats on and off, the demo's dashboard stream, and bad
 * input (usage + exit 2, clear errors + exit 1).
 */
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";
import WebSocket from "ws";
import {bundledEntryPath} from "../../engine/bundlePaths.js";
import {rawDataToString} from "../../extension/host/net/rawData.js";
import {defaultPrefillChunkTokens} from "../../protocol/engineOptions.js";
import {expectedBackend} from "../helpers/expectedBackend.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";
import {writeDemoLoraAdapter} from "../helpers/loraAdapter.js";
import {assertBenchResult, assertTableMatches} from "./benchResultChecks.js";

type Run = {code: number | null, stdout: string, stderr: string};

function runCli(args: string[], options: {onStdout?: (text: string) => void, timeoutMs?: number} = {}): Promise<Run> {
    return new Promise((resolve) => {
        const child = spawn(process.execPath, [bundledEntryPath("cli.js"), ...args], {
            env: {...process.env, INFERENCE_MONITOR_CACHE_DIR: testCacheDir}, stdio: ["ignore", "pipe", "pipe"]
        });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
            stdout += chunk;
            options.onStdout?.(stdout);
        });
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
            stderr += chunk;
        });
        const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 180_000);
        child.on("exit", (code) => {
            clearTimeout(timer);
            resolve({code, stdout, stderr});
        });
    });
}

async function busyPort(): Promise<{port: number, close: () => void}> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {port: (server.address() as net.AddressInfo).port, close: () => server.close()};
}

describe("inference-monitor bench", () => {
    for (const mode of ["process", "in-process"] as const)
        for (const stats of ["on", "off"] as const)
            test(`${mode}, stats ${stats}: vLLM's table and result keys, consistent; warm-ups in no metric; StatsManager's totals agree with the client`, async () => {
                const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-bench-")), "result.json");
                const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "6", "--input-len", "8", "--output-len", "9",
                    "--max-concurrency", "3", "--request-rate", "40", "--num-warmups", "2", "--stats", stats, "--stats-interval-ms", "200", "--json", json,
                    ...(mode === "in-process" ? ["--in-process", "--prefix-cache", "off"] : ["--prefill-chunk", "48"])]);
                assert.equal(run.code, 0, run.stderr);
                assert.match(run.stdout, /Serving Benchmark Result/);
                assert.match(run.stdout, /Successful requests:\s+6\n/);
                assert.match(run.stdout, /Total generated tokens:\s+54\n/);
                assert.match(run.stdout, /Client-side Queueing/);
                const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
                assertBenchResult(result, {numPrompts: 6, outputLen: 9, queue: true});
                assertTableMatches(run.stdout, result);
                assert.equal(result.completed, 6);
                assert.equal(result.failed, 0);
                assert.equal(result.total_output_tokens, 54);
                assert.equal(result.num_warmups, 2);
                assert.equal(result.request_rate, 40);
                assert.equal(result.max_concurrency, 3);
                assert.equal(result.stats, stats);
                assert.equal(result.mode, mode);
                assert.equal(result.prefix_cache, mode === "in-process" ? "off" : "on");
                // The budget the engine reports it runs with: the flag's, or the backend's default.
                const chunk = mode === "in-process" ? defaultPrefillChunkTokens(expectedBackend()) : 48;
                assert.equal(result.prefill_chunk_tokens, chunk);
                assert.match(run.stdout, new RegExp(`· prefill chunk ${chunk} tokens\n`));
                assert.equal(result.backend, expectedBackend());
                assert.equal(result.model_name, path.basename(await tinyModelPath(), ".gguf"), "the served model id, as over HTTP");
                if (stats === "on") {
                    assert.equal(result.stats_agree, true);
                    // The engine served the 2 warm-ups too: 8 requests of 9 tokens.
                    assert.match(run.stdout, /stats totals agree with the client: 8 requests \(2 of them warm-ups\), \d+ prompt and 72 generated tokens/);
                } else {
                    assert.equal(result.stats_agree, null);
                    assert.doesNotMatch(run.stdout, /stats totals/);
                }
            });

    test("bad flags and values: usage and exit code 2", async () => {
        for (const args of [["bench", "--bogus"], ["bench", "--num-prompts", "0"], ["bench", "--stats", "maybe"], ["bench", "--request-rate", "-1"], ["bench", "--num-warmups", "-1"],
            ["bench", "--random-range-ratio", "1"], ["bench", "--random-range-ratio", "-0.1"], ["bench", "--random-range-ratio", "half"],
            ["bench", "--prometheus-port", "70000"], ["bench", "--prefix-cache", "maybe"], ["serve", "--prefix-cache", "1"], ["serve", "--tile-padding", "no"], ["serve", "--gpu", "rocm"],
            ["bench", "--prefill-chunk", "0"], ["serve", "--prefill-chunk", "lots"], ["bench", "--base-url", "http://127.0.0.1:1/v1", "--prefill-chunk", "64"], ["demo", "--gpu", "CUDA"],
            ["bench", "--base-url", "http://127.0.0.1:1/v1", "--gpu", "off"], ["bench", "--base-url", "http://127.0.0.1:1/v1", "--lora", "a.gguf"],
            ["serve", "--lora-scaled", "a.gguf:x"], ["bench", "--lora-scaled", "a.gguf"],
            ["bench", "--base-url", "http://127.0.0.1:1/v1", "--prefix-cache", "off"], ["bench", "--no-cache-prompt"],
            ["demo", "--port", "abc"], ["make-model", "--size", "huge", "--out", "/tmp/x.gguf"], ["frobnicate"]]) {
            const run = await runCli(args);
            assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
            assert.match(run.stderr, /Usage: inference-monitor/, args.join(" "));
        }
    });

    test("--gpu naming a backend this machine lacks: an error that names it, not a silent fall back to the CPU", async () => {
        // Metal never exists on Linux or Windows (node-llama-cpp would quietly run on the CPU); on a Mac, CUDA never does.
        const [flag, name] = process.platform === "darwin" ? ["cuda", "CUDA"] : ["metal", "Metal"];
        const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "1", "--gpu", flag]);
        assert.equal(run.code, 1, run.stdout);
        assert.match(run.stderr, new RegExp(`Could not start the engine: no ${name} backend works here: .*"auto" uses whichever GPU backend works, "off" the CPU`));
    });

    test("--gpu off runs on the CPU and says so", async () => {
        const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "2", "--output-len", "4", "--gpu", "off"]);
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /^Engine: CPU · /m);
    });

    test("--lora-scaled runs the benchmark with the adapter and says so; a file that is not one is the engine's error", async () => {
        const adapter = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-cli-lora-")), "tiny-lora.gguf");
        try {
            await writeDemoLoraAdapter(adapter, {size: "tiny", seed: 0});
            const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "2", "--output-len", "4", "--lora-scaled", `${adapter}:0.5`]);
            assert.equal(run.code, 0, run.stderr);
            assert.match(run.stdout, /^Engine: .* · LoRA tiny-lora\.gguf × 0\.5$/m);
            const wrong = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "1", "--lora", await tinyModelPath()]);
            assert.equal(wrong.code, 1);
            assert.match(wrong.stderr, /LoRA adapter .*tiny.*\.gguf: not a LoRA adapter/);
        } finally {
            fs.rmSync(path.dirname(adapter), {recursive: true, force: true});
        }
    });

    test("a model that fails to load: the engine's error and exit code 1", async () => {
        const run = await runCli(["bench", "--model", "/nonexistent/model.gguf", "--num-prompts", "1"]);
        assert.equal(run.code, 1);
        assert.match(run.stderr, /Could not start the engine: Model file not found: \/nonexistent\/model\.gguf/);
    });

    test("a workload too long for the context: refused up front with both numbers and exit code 2, nothing sent", async () => {
        const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "2", "--input-len", "8", "--output-len", "99999999",
            "--context-size", "512", "--no-progress"]);
        assert.equal(run.code, 2, run.stderr);
        assert.match(run.stderr, /each request needs about 100000007 tokens \(--prefix-len 0 \+ --input-len 8 \+ --output-len 99999999\), but the engine's context holds 512 tokens per sequence/);
        assert.doesNotMatch(run.stdout, /Serving Benchmark Result/);
    });

    test("--random-range-ratio: each request its own exact output length, the total theirs; the longest checked against the context", async () => {
        const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-bench-")), "result.json");
        const run = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "8", "--input-len", "8", "--output-len", "8",
            "--random-range-ratio", "0.5", "--max-concurrency", "4", "--seed", "2", "--json", json, "--no-progress"]);
        assert.equal(run.code, 0, run.stderr);
        const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
        assert.equal(result.random_range_ratio, 0.5);
        assert.equal(result.failed, 0);
        const total = Number(result.total_output_tokens);
        // 8 requests of 4…12 tokens each; with this seed not all 8 (a ratio that did nothing would give exactly 64).
        assert.ok(total >= 32 && total <= 96 && total !== 64, `total output tokens ${total}`);
        assert.match(run.stdout, /stats totals agree with the client: 8 requests, \d+ prompt and \d+ generated tokens/);
        assert.match(run.stdout, new RegExp(`Total generated tokens:\\s+${total}\n`));

        const tooLong = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "2", "--input-len", "8", "--output-len", "400",
            "--random-range-ratio", "0.5", "--context-size", "512", "--no-progress"]);
        assert.equal(tooLong.code, 2, tooLong.stderr);
        assert.match(tooLong.stderr, /each request needs about 612 tokens \(--prefix-len 0 \+ the longest input 12 \+ output 600 at --random-range-ratio 0\.5\), but the engine's context holds 512/);
    });

    test("a port in use: a clear error and exit code 1", async () => {
        const busy = await busyPort();
        try {
            const bench = await runCli(["bench", "--model", await tinyModelPath(), "--num-prompts", "1", "--prometheus-port", String(busy.port)]);
            assert.equal(bench.code, 1);
            const inUse = `port ${busy.port} on 127\\.0\\.0\\.1 is already in use`;
            assert.match(bench.stderr, new RegExp(`Prometheus ${inUse} \\(pick another --prometheus-port, or 0 for none\\)`));
            const demo = await runCli(["demo", "--model", await tinyModelPath(), "--port", String(busy.port), "--duration", "1"]);
            assert.equal(demo.code, 1);
            assert.match(demo.stderr, new RegExp(`Dashboard ${inUse} \\(pick another --port, or 0 for a free one\\)`));
        } finally {
            busy.close();
        }
    });
});

describe("inference-monitor demo", () => {
    test("serves the dashboard stream (snapshot, then deltas), logs vLLM's line, stops after --duration with the table", async () => {
        let dashboardUrl: string | undefined;
        let announced: (url: string) => void = () => undefined;
        const urlKnown = new Promise<string>((resolve) => {
            announced = resolve;
        });
        const running = runCli(["demo", "--model", await tinyModelPath(), "--duration", "8", "--log-interval", "2", "--rate", "6"], {
            onStdout: (text) => {
                const match = /Dashboard: (http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+)/.exec(text);
                if (match !== null && dashboardUrl === undefined) {
                    dashboardUrl = match[1]!;
                    announced(dashboardUrl);
                }
            }
        });
        const url = await urlKnown;
        const page = await fetch(url);
        assert.equal(page.status, 200);
        assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'none'/);
        const messages: Array<{type: string, delta?: {seq: number}}> = [];
        const ws = new WebSocket(url.replace("http", "ws").replace("/?", "/stream?")); // the printed URL's token opens /stream
        await new Promise((resolve) => ws.on("open", resolve));
        ws.on("message", (data) => messages.push(JSON.parse(rawDataToString(data)) as {type: string}));
        ws.send(JSON.stringify({type: "ready", protocolVersion: 1}));
        await new Promise((resolve) => setTimeout(resolve, 3000));
        ws.close();
        assert.equal(messages[0]?.type, "snapshot");
        const deltas = messages.slice(1).filter((m) => m.type === "delta");
        assert.ok(deltas.length >= 3, `deltas arrived (${deltas.length})`);
        assert.deepEqual(deltas.map((d) => d.delta!.seq), deltas.map((_, i) => i + 1), "consecutive seq from 1");

        const run = await running;
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /Engine 000: Avg prompt throughput: [\d.]+ tokens\/s, Avg generation throughput: [\d.]+ tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: [\d.]+%/);
        assert.match(run.stdout, /Serving Benchmark Result/);
        assert.match(run.stdout, /Requests: \d+ arrived/);
    });
});
