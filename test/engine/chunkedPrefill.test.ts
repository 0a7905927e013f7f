/**
 * Chunked prefill on real node-llama-cpp: a long prompt is evaluated a budget of tokens per step, in
 * the same batches as the running requests' decodes, so those keep generating while it prefills; the
 * result is exactly what an unchunked engine generates.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {Xoshiro128} from "../../common/seededRandom.js";
import {makePrompt} from "../../extension/host/bench/workload.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";

const sentence = "the little girl saw a big red ball in the park and ran after it with her happy dog under the blue sky ";
const longPrompt = sentence.repeat(20).trim();
const greedy = {temperature: 0, ignoreEos: true} as const;
const chunk = 64;

describe("chunked prefill", () => {
    let chunked: EngineUnderTest;
    let whole: EngineUnderTest;

    before(async () => {
        chunked = await EngineUnderTest.start({parallel: 2, prefillChunkTokens: chunk, prefixCache: false});
        whole = await EngineUnderTest.start({parallel: 2, prefillChunkTokens: 100_000, prefixCache: false});
    });
    after(async () => {
        await chunked.engine.dispose();
        await whole.engine.dispose();
    });

    test("a long prompt generates exactly what it does unchunked", async () => {
        const a = await chunked.generate({prompt: longPrompt, maxTokens: 16, ...greedy});
        const b = await whole.generate({prompt: longPrompt, maxTokens: 16, ...greedy});
        assert.ok(a.finished.promptTokens > 4 * chunk, `the prompt has ${a.finished.promptTokens} tokens`);
        assert.equal(a.text, b.text);
        assert.equal(a.stepTokens, a.finished.promptTokens + 16, "every prompt token is evaluated once");
    });

    test("a running request keeps generating while a long prompt prefills", async () => {
        const running = chunked.send({prompt: "once upon a time", maxTokens: 400, ...greedy});
        // Let it start generating first.
        while (!chunked.events.some((e) => e.id === running.id && e.kind === "tokens"))
            await new Promise((resolve) => setTimeout(resolve, 5));
        const long = chunked.send({prompt: longPrompt, maxTokens: 8, ...greedy});
        const longResult = await long.done;
        await running.done;
        const scheduledAt = chunked.events.findIndex((e) => e.id === long.id && e.kind === "scheduled");
        const firstTokenAt = chunked.events.findIndex((e) => e.id === long.id && e.kind === "tokens");
        const tokensMeanwhile = chunked.events.slice(scheduledAt, firstTokenAt)
            .reduce((sum, e) => sum + (e.id === running.id && e.kind === "tokens" ? e.times.length : 0), 0);
        // One decode per prefill step: the prompt needs ⌈tokens / chunk⌉ steps, all but the last carry a token of the running request.
        const steps = Math.ceil(longResult.finished.promptTokens / chunk);
        assert.ok(tokensMeanwhile >= steps - 2, `the running request got ${tokensMeanwhile} tokens during ${steps} prefill steps`);
    });
});

describe("chunked prefill under a closed-loop load", () => {
    test("every request of 48, arriving at uneven moments on 4 sequences with prefix caching, generates exactly its tokens", async () => {
        // Prefills start and end while others are prefilling, so a request's share of the step budget
        // changes between steps; it once took the whole rest of a prompt and ended with no token at all.
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: true, prefillChunkTokens: 32});
        try {
            const rng = new Xoshiro128(0);
            const prompts = Array.from({length: 48}, () => makePrompt(rng, 64));
            const wrong: string[] = [];
            let next = 0;
            await Promise.all(Array.from({length: 4}, async () => {
                while (next < prompts.length) {
                    await new Promise((resolve) => setTimeout(resolve, rng.nextUint32() % 4));
                    const i = next++;
                    const {finished} = await engine.generate({prompt: prompts[i]!, maxTokens: 32, ignoreEos: true, temperature: 0.8, seed: i});
                    if (finished.reason !== "length" || finished.generatedTokens !== 32)
                        wrong.push(`request ${i}: ${finished.reason} after ${finished.generatedTokens} tokens (prompt ${finished.promptTokens})`);
                }
            }));
            assert.deepEqual(wrong, []);
        } finally {
            await engine.engine.dispose();
        }
    });
});
