/**
 * The engine (its own process, as the extension runs it) on a real trained model, stories260K: it ends
 * a story by itself, streams readable English without U+FFFD, and the stats agree with the client's own
 * counts. The generated demo models cannot show this: their random weights never choose to stop.
 *
 * stories260K comes from llama2.c, which separates training stories with `<s>` (id 1): the model ends a
 * story by sampling `<s>` and starting another, and never samples its declared EOS `</s>` (id 2). So the
 * natural-stop test runs on a temporary copy that declares `<s>` its EOS (one metadata value patched).
 */
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import type {RequestHandle} from "../../extension/host/engineClient/requestHandle.js";
import type {RequestResult} from "../../extension/host/engineClient/requestState.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {copyWithEosTokenId, findStoriesModel} from "../helpers/sharedModels.js";
import {skipReason} from "../helpers/prerequisites.js";

const stories = findStoriesModel();
const suite = "real trained model (stories260K)";
const prompt = "Once upon a time";
/** Far more than one TinyStories story: reaching it means the story's end was not taken as EOS. */
const maxTokens = 900;
const storyEnd = 1;

type Served = {client: EngineClient, stats: StatsManager};

async function serve(modelPath: string): Promise<Served> {
    const client = new EngineClient({modelPath, mode: "process", threads: 1, contextSize: 1024, parallel: 1, statsIntervalMs: 0});
    await client.start();
    const stats = new StatsManager({tickIntervalMs: 0});
    client.observe(stats);
    return {client, stats};
}

/** Streams the request, checking each chunk; returns the result and the client's own counts. */
async function stream(handle: RequestHandle): Promise<{result: RequestResult, streamed: string, streamedTokens: number}> {
    let streamed = "";
    let streamedTokens = 0;
    for await (const chunk of handle) {
        assert.ok(!chunk.text.includes("\uFFFD"), `U+FFFD in chunk ${JSON.stringify(chunk.text)}`);
        streamed += chunk.text;
        streamedTokens += chunk.tokens;
    }
    return {result: await handle.done, streamed, streamedTokens};
}

function assertEnglish(text: string): void {
    assert.ok(!text.includes("\uFFFD"));
    assert.match(text, /^[A-Za-z0-9 .,!?'"\n:;-]+$/, `English-like text: ${JSON.stringify(text)}`);
    const words = text.split(/\s+/).filter((word) => /^[A-Za-z']+[.,!?"]*$/.test(word));
    assert.ok(words.length >= 0.8 * text.split(/\s+/).length && words.length >= 20, `mostly real words: ${JSON.stringify(text)}`);
}

describe(suite, {skip: skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    let tmpDir = "";
    let asShipped: Served | undefined;
    let storyEndIsEos: Served | undefined;

    before(async () => {
        if (stories.missing !== undefined)
            assert.fail(`CI must run this suite, but ${stories.missing}`);
        tmpDir = await fs.mkdtemp(path.join(os.tmpdir(), "im-real-model-"));
        const patched = path.join(tmpDir, "stories260K-eos-is-bos.gguf");
        await copyWithEosTokenId(stories.path, patched, storyEnd);
        asShipped = await serve(stories.path);
        storyEndIsEos = await serve(patched);
    });
    after(async () => {
        await asShipped?.client.stop();
        await storyEndIsEos?.client.stop();
        if (tmpDir !== "")
            await fs.rm(tmpDir, {recursive: true, force: true});
    });

    test("a story ends with EOS: finish reason stop well before the limit, clean English streamed, and the stats agree", async () => {
        const {client, stats} = storyEndIsEos!;
        const {result, streamed, streamedTokens} = await stream(client.generate({prompt, maxTokens, temperature: 0}));

        assert.equal(result.reason, "stop", `finished by ${result.reason} after ${result.generatedTokens} tokens`);
        assert.ok(result.generatedTokens > 20 && result.generatedTokens < maxTokens / 2, String(result.generatedTokens));
        assert.equal(result.text, streamed, "the chunks add up to the final text");
        assertEnglish(streamed);
        assert.ok(!streamed.includes("Once upon a time"), "one story, not the next one too");

        assert.equal(result.promptTokens, await client.countTokens(prompt) + 1, "prompt tokens are the tokenizer's count and the BOS llama2's vocabulary begins with");
        assert.equal(streamedTokens, result.generatedTokens, "every generated token arrived in a chunk");
        assert.equal(result.tokenTimes.length, result.generatedTokens);
        const totals = stats.benchTotals();
        assert.deepEqual(totals.requests.byReason, {stop: 1, length: 0, abort: 0, error: 0});
        assert.equal(totals.generationTokens, streamedTokens, "output tokens in the stats = tokens the client received");
        assert.equal(totals.finishedGenerationTokens, streamedTokens);
        assert.equal(totals.promptTokens, result.promptTokens);
        assert.equal(totals.finishedPromptTokens, result.promptTokens);
    });

    test("sampled stories (temperature 0.8, three seeds) stop by themselves too", async () => {
        const {client} = storyEndIsEos!;
        const results = await Promise.all([1, 2, 3].map((seed) => stream(client.generate({prompt, maxTokens, temperature: 0.8, seed}))));
        for (const {result, streamed} of results) {
            assert.equal(result.reason, "stop", `finished by ${result.reason} after ${result.generatedTokens} tokens`);
            assert.equal(result.text, streamed);
            assertEnglish(streamed);
        }
        assert.ok(new Set(results.map((r) => r.streamed)).size > 1, "different seeds tell different stories");
    });

    test("the file as shipped: <s> is not EOS, so it writes story after story up to the limit (finish reason length)", async () => {
        const {client, stats} = asShipped!;
        const limit = 400;
        const {result, streamed, streamedTokens} = await stream(client.generate({prompt, maxTokens: limit, temperature: 0}));
        assert.equal(result.reason, "length");
        assert.equal(result.generatedTokens, limit);
        assert.equal(streamedTokens, limit);
        assert.equal(result.text, streamed);
        assertEnglish(streamed);
        assert.match(streamed, /Once upon a time/, "a second story began after <s>");
        assert.equal(stats.benchTotals().generationTokens, limit);
    });
});
