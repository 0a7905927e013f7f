/**
 * `inference-monitor bench --base-url`: the serving benchmark over HTTP against our own OpenAI-compatible
 * server (in this process, on the tiny model), both endpoints; the client's counts equal the server's
 * StatsManager; the same workload over IPC gives the same token totals; unreachable servers, HTTP errors
 * and wrong keys are failures with their messages and a non-zero exit.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {parseBenchArgs} from "../../cli/benchArgs.js";
import {runBenchmark, runHttpBenchmark} from "../../extension/host/bench/runBenchmark.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import {StatsPipeline} from "../../extension/host/stats/statsPipeline.js";
import {busyPort, runCli} from "../helpers/runCli.js";
import {assertBenchResult, assertTableMatches} from "../host/benchResultChecks.js";
import {tinyModelPath} from "../helpers/testModels.js";

const contextSize = 1024;
const workload = ["--num-prompts", "6", "--input-len", "8", "--output-len", "9", "--max-concurrency", "3", "--no-progress"];

function tempJson(): string {
    return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-bench-http-")), "result.json");
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
    const busy = await busyPort();
    busy.close();
    return busy.port;
}

describe("bench --base-url", () => {
    let client: EngineClient;
    let pipeline: StatsPipeline;
    let server: ApiServer;
    let keyed: ApiServer;

    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize, parallel: 4, statsIntervalMs: 200});
        pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 0});
        pipeline.attach(client);
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, metrics: await pipeline.mountMetrics()});
        keyed = await ApiServer.listen({engine: {current: () => client}, port: 0, apiKeys: [{key: "sesame"}]});
    });
    after(async () => {
        await keyed.close();
        await server.close();
        await client.stop();
        await pipeline.dispose();
    });

    for (const endpoint of ["completions", "chat"] as const)
        test(`${endpoint}: vLLM's table and result keys; exact output tokens; the server's stats equal the client's counts`, async () => {
            const json = tempJson();
            const before = pipeline.totals();
            const run = await runCli(["bench", "--base-url", server.baseUrl, "--endpoint", endpoint, ...workload, "--json", json]);
            assert.equal(run.code, 0, run.stderr);
            assert.match(run.stdout, /Serving Benchmark Result/);
            assert.match(run.stdout, /Successful requests:\s+6\n/);
            assert.match(run.stdout, /Total generated tokens:\s+54\n/);
            assert.match(run.stdout, new RegExp(`Server: ${server.baseUrl}/${endpoint === "chat" ? "chat/completions" : "completions"} · model inference-monitor-demo-tiny`));
            const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
            assertBenchResult(result, {numPrompts: 6, outputLen: 9, queue: true});
            assertTableMatches(run.stdout, result);
            const number = (key: string): number => result[key] as number;
            assert.equal(result.completed, 6);
            assert.equal(result.failed, 0);
            assert.equal(result.total_output_tokens, 6 * 9);
            assert.equal(result.base_url, server.baseUrl);
            assert.equal(result.endpoint, endpoint);
            assert.equal(result.model_name, "inference-monitor-demo-tiny-seed0-f16-v1");
            assert.deepEqual(result.errors, []);
            const after = pipeline.totals();
            assert.equal(after.finished - before.finished, 6);
            assert.equal(after.generationTokens - before.generationTokens, number("total_output_tokens"));
            assert.equal(after.promptTokens - before.promptTokens, number("total_input_tokens"));
        });

    test("--num-warmups: the server serves the warm-ups, the result counts only the measured requests", async () => {
        const json = tempJson();
        const before = pipeline.totals();
        const run = await runCli(["bench", "--base-url", server.baseUrl, ...workload, "--num-warmups", "3", "--request-rate", "50", "--json", json]);
        assert.equal(run.code, 0, run.stderr);
        const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
        assertBenchResult(result, {numPrompts: 6, outputLen: 9, queue: true});
        assertTableMatches(run.stdout, result);
        assert.equal(result.completed, 6);
        assert.equal(result.total_output_tokens, 54);
        assert.equal(result.num_warmups, 3);
        const after = pipeline.totals();
        assert.equal(after.finished - before.finished, 9, "6 measured requests and 3 warm-ups reached the server");
        assert.equal(after.generationTokens - before.generationTokens, 9 * 9);
        // The warm-ups are copies of the first request: their prompt tokens are 3 equal shares of the rest.
        const warmupPromptTokens = after.promptTokens - before.promptTokens - (result.total_input_tokens as number);
        assert.ok(warmupPromptTokens > 0 && warmupPromptTokens % 3 === 0, String(warmupPromptTokens));
    });

    test("per request: TTFT ≤ E2EL, one delivery per text chunk, usage from the server", async () => {
        const run = await runHttpBenchmark(parseBenchArgs(["--base-url", server.baseUrl, "--endpoint", "chat", ...workload], false),
            {baseUrl: server.baseUrl, endpoint: "chat"}, {stderr: () => undefined});
        assert.equal(run.results.length, 6);
        for (const r of run.results) {
            assert.equal(r.reason, "length", r.error);
            assert.equal(r.usage, true);
            assert.equal(r.generatedTokens, 9);
            assert.ok(r.text.length > 0);
            assert.ok(r.deliveries.length >= 1 && r.deliveries.length <= 9, String(r.deliveries.length));
            const ttft = r.deliveries[0]!.t - r.arrival;
            assert.ok(ttft > 0 && ttft <= r.lastDelivered - r.arrival);
            assert.ok(r.deliveries.every((d, i) => i === 0 || d.t >= r.deliveries[i - 1]!.t));
        }
    });

    test("the same workload over our /v1 and over IPC in one run: the same requests and token totals", async () => {
        const http = await runHttpBenchmark(parseBenchArgs(["--base-url", server.baseUrl, ...workload], false),
            {baseUrl: server.baseUrl, endpoint: "completions"}, {stderr: () => undefined});
        const ipc = await runBenchmark(parseBenchArgs(["--model", await tinyModelPath(), "--threads", "1", "--context-size", String(contextSize),
            "--stats", "off", ...workload], false), {stderr: () => undefined, createStatsSession: () => Promise.reject(new Error("stats are off"))});
        for (const run of [http, ipc]) {
            assert.equal(run.metrics.completed, 6);
            assert.equal(run.metrics.failed, 0);
        }
        assert.equal(http.metrics.total_output_tokens, 54);
        assert.equal(ipc.metrics.total_output_tokens, http.metrics.total_output_tokens);
        assert.equal(ipc.metrics.total_input_tokens, http.metrics.total_input_tokens);
        assert.deepEqual(http.results.map((r) => r.promptTokens), ipc.results.map((r) => r.promptTokens));
    });

    test("an unreachable server: a clear error, or every request failed with its message; exit code 1", async () => {
        const port = await closedPort();
        const unreachable = await runCli(["bench", "--base-url", `http://127.0.0.1:${port}/v1`, ...workload]);
        assert.equal(unreachable.code, 1);
        assert.match(unreachable.stderr, new RegExp(`Could not benchmark http://127\\.0\\.0\\.1:${port}/v1: could not reach .*/v1/models: connect ECONNREFUSED`));
        const json = tempJson();
        const named = await runCli(["bench", "--base-url", `http://127.0.0.1:${port}`, "--model-name", "m", ...workload, "--json", json]);
        assert.equal(named.code, 1);
        assert.match(named.stdout, /Successful requests:\s+0\n/);
        assert.match(named.stdout, /Failed requests:\s+6\n/);
        assert.match(named.stderr, new RegExp(`6 of 6 requests failed:\\n  6× POST http://127\\.0\\.0\\.1:${port}/v1/completions: connect ECONNREFUSED`));
        const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
        assertBenchResult(result, {numPrompts: 6, outputLen: 9, queue: true});
        assertTableMatches(named.stdout, result);
        assert.equal(result.failed, 6);
        assert.equal((result.errors as string[]).length, 6);
    });

    test("HTTP errors keep the server's message: a prompt too long for the context, a wrong API key", async () => {
        const tooLong = await runCli(["bench", "--base-url", server.baseUrl, "--num-prompts", "2", "--input-len", String(contextSize * 2), "--output-len", "4"]);
        assert.equal(tooLong.code, 1);
        assert.match(tooLong.stdout, /Failed requests:\s+2\n/);
        assert.match(tooLong.stderr, /2 of 2 requests failed:\n( {2}1× HTTP 400: this model's context holds 1024 tokens, but the request needs \d+.*\n){2}/);
        const wrongKey = await runCli(["bench", "--base-url", keyed.baseUrl, "--api-key", "wrong", ...workload]);
        assert.equal(wrongKey.code, 1);
        assert.match(wrongKey.stderr, /could not benchmark .*: GET .*\/v1\/models: HTTP 401: invalid or missing API key/i);
        const rightKey = await runCli(["bench", "--base-url", keyed.baseUrl, "--api-key", "sesame", ...workload]);
        assert.equal(rightKey.code, 0, rightKey.stderr);
        assert.match(rightKey.stdout, /Successful requests:\s+6\n/);
    });

    test("flags that do not fit --base-url, or need it: usage and exit code 2", async () => {
        for (const [args, message] of [
            [["--base-url", server.baseUrl, "--model", "x.gguf"], /--model is a GGUF file for the local engine; with --base-url, name the server's model with --model-name/],
            [["--base-url", server.baseUrl, "--in-process"], /--in-process configures the local engine/],
            [["--endpoint", "chat"], /--endpoint needs --base-url/],
            [["--model-name", "m"], /--model-name needs --base-url/],
            [["--base-url", server.baseUrl, "--endpoint", "embeddings"], /--endpoint must be completions or chat/],
            [["--base-url", "localhost:8080"], /--base-url: expected an http:\/\/ or https:\/\/ URL/]
        ] as const) {
            const run = await runCli(["bench", ...args]);
            assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
            assert.match(run.stderr, message);
        }
    });
});
