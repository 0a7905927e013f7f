/**
 * bench:peer's kernel ceiling (scripts/kernelCeiling.ts) against the real llama-server: both sides evaluate
 * the same prompt tokens (llama-server's own `timings.prompt_n` must equal what was sent, else it throws),
 * each reports finite positive prefill and decode rates, and the ratios are ours over llama-server's.
 * Skips when llama-server is not built, unless CI=true.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {describeKernelCeiling, measureKernelCeiling} from "../../scripts/kernelCeiling.js";
import {buildLlamaServer} from "../../scripts/llamaServer.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

const suite = "bench:peer's kernel ceiling against llama-server";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    test("the same prompt tokens on both sides, positive rates, ratios ours / llama-server", async () => {
        const binary = await buildLlamaServer();
        const modelPath = await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        const ceiling = await measureKernelCeiling({binary, modelPath, threads: 1, text: "the little dog ran to the park and played ".repeat(20),
            promptTokens: 64, outputTokens: 16, repeats: 1, temperature: 0.8});
        assert.equal(ceiling.prompt_tokens, 64);
        for (const side of [ceiling.ours, ceiling.llama_server])
            for (const rate of [side.prefill_tok_s, side.decode_tok_s])
                assert.ok(Number.isFinite(rate) && rate > 0, JSON.stringify(ceiling));
        assert.equal(ceiling.prefill_ratio, ceiling.ours.prefill_tok_s / ceiling.llama_server.prefill_tok_s);
        assert.equal(ceiling.decode_ratio, ceiling.ours.decode_tok_s / ceiling.llama_server.decode_tok_s);
        assert.match(describeKernelCeiling(ceiling), /^kernel ceiling \(1 sequence, 64-token prompt, 16 tokens, 1 thread, medians of 1\): prefill ours \d+ tok\/s vs llama-server \d+ tok\/s/);
    });

    test("a text shorter than the prompt asked for is an error, not a shorter prompt", async () => {
        const binary = await buildLlamaServer();
        const modelPath = await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        await assert.rejects(measureKernelCeiling({binary, modelPath, threads: 1, text: "the dog", promptTokens: 64, outputTokens: 4,
            repeats: 1, temperature: 0.8}), /makes \d+ tokens, fewer than the 64 asked for/);
    });
});
