/**
 * `inference-monitor bench --base-url` against llama.cpp's real `llama-server` (built by
 * `.ci/build-llama-server.sh` from the llama.cpp source node-llama-cpp ships): the same client that
 * benchmarks our endpoint reads llama-server's stream, its usage makes the output token count exact, and
 * `--no-cache-prompt` sends `cache_prompt: false`, which llama-server honours (no cached prompt tokens),
 * while by default it reuses cached prefixes. Skips when the binary is not built, unless CI=true.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {buildLlamaServer, llamaServerCounter, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {runCli} from "../helpers/runCli.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

const storiesModel = path.resolve(__dirname, "../../../shared/models/stories260K.gguf");

const prompts = 6;
const outputLen = 16;
const workload = ["--num-prompts", String(prompts), "--input-len", "8", "--output-len", String(outputLen), "--max-concurrency", "2", "--no-progress"];

const llamaServerSuite = "bench --base-url against llama.cpp's llama-server";
describe(llamaServerSuite, {skip: llamaServerSkipReason(llamaServerSuite)}, () => {
    let server: LlamaServer;

    before(async () => {
        // Instant when built (CI builds it in .ci/run); otherwise builds (CI only: locally this file skipped above).
        const binary = await buildLlamaServer();
        // Else the demo tiny model's textOnly variant: llama-server fails a completion whose text is not valid UTF-8,
        // which the plain demo model's random weights produce (lone byte-fallback tokens).
        const model = fs.existsSync(storiesModel) ? storiesModel : await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        server = await startLlamaServer({binary, model, args: ["-t", "1", "-np", "2", "-c", "2048", "--no-webui", "--metrics"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await server?.stop();
    });

    async function bench(extra: string[]): Promise<Record<string, unknown>> {
        const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-bench-llama-")), "result.json");
        const run = await runCli(["bench", "--base-url", server.baseUrl, ...workload, ...extra, "--json", json], {timeoutMs: 30_000});
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /Serving Benchmark Result/);
        assert.doesNotMatch(run.stdout, /carried no usage/);
        const result = JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>;
        assert.equal(result.completed, prompts);
        assert.equal(result.failed, 0);
        assert.deepEqual(result.errors, []);
        assert.equal(result.total_output_tokens, prompts * outputLen);
        assert.ok((result.total_input_tokens as number) >= prompts * 8, String(result.total_input_tokens));
        for (const key of ["median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "output_throughput"])
            assert.ok(typeof result[key] === "number" && result[key] > 0, `${key}: ${String(result[key])}`);
        return result;
    }

    test("--no-cache-prompt: exact tokens, positive TTFT/ITL, and llama-server reuses no cached prompt tokens", async () => {
        const predicted = await llamaServerCounter(server.origin, "llamacpp:tokens_predicted_total");
        const result = await bench(["--no-cache-prompt"]);
        assert.equal(result.cache_prompt, false);
        assert.equal(await llamaServerCounter(server.origin, "llamacpp:tokens_predicted_total") - predicted, prompts * outputLen);
        assert.equal(await llamaServerCounter(server.origin, "llamacpp:prompt_tokens_cached_total"), 0);
    });

    test("default (llama-server's cache_prompt true): the same workload again reuses cached prompt tokens", async () => {
        const result = await bench([]);
        assert.equal(result.cache_prompt, null);
        assert.ok(await llamaServerCounter(server.origin, "llamacpp:prompt_tokens_cached_total") > 0);
    });
});
