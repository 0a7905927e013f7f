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
import {tileFillingTokens, tiledAttentionQueries, tileWaste} from "../../engine/attentionTilePadding.js";
import {demoModelSizes} from "../../engine/model/demoModel.js";

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

describe("chunked prefill's budget, first come, first served", () => {
    const otherLongPrompt = "a small brown dog found an old blue boat by the river and sailed away to see the tall green hills ".repeat(20).trim();
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({parallel: 4, prefillChunkTokens: 32, prefixCache: false});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    /** The index of the step (outputs message) that carried request `id`'s first token. */
    const firstTokenStep = (id: string): number => engine.steps.findIndex((events) => events.some((e) => e.id === id && e.kind === "tokens"));

    async function whileOneGenerates<T>(work: () => Promise<T>): Promise<T> {
        const running = engine.send({prompt: "once upon a time", maxTokens: 1000, ...greedy});
        while (!engine.events.some((e) => e.id === running.id && e.kind === "tokens"))
            await new Promise((resolve) => setTimeout(resolve, 5));
        try {
            return await work();
        } finally {
            engine.engine.handle({type: "cancel", id: running.id});
            await running.done;
        }
    }

    test("of two long prompts arriving together, the first goes in whole pieces and is done first", async () => {
        const [a, b] = await whileOneGenerates(async () => {
            const first = engine.send({prompt: longPrompt, maxTokens: 2, ...greedy});
            const second = engine.send({prompt: otherLongPrompt, maxTokens: 2, ...greedy});
            return [{id: first.id, ...await first.done}, {id: second.id, ...await second.done}];
        });
        assert.equal(a.finished.reason, "length");
        assert.equal(b.finished.reason, "length");
        const bSteps = Math.ceil(b.finished.promptTokens / 32);
        // Shared fairly, both would end within a step of each other; served in turn, the second takes its own steps after.
        assert.ok(firstTokenStep(b.id) - firstTokenStep(a.id) >= bSteps - 2,
            `first tokens in steps ${firstTokenStep(a.id)} and ${firstTokenStep(b.id)}; the second prompt needs ${bSteps} steps`);
        // No step evaluates more of the two prompts' pieces than the budget.
        const processed = new Map<string, number>();
        for (const [index, events] of engine.steps.entries()) {
            let tokens = 0;
            for (const event of events)
                if (event.kind === "prefilled" && (event.id === a.id || event.id === b.id)) {
                    tokens += event.processedTokens - (processed.get(event.id) ?? 0);
                    processed.set(event.id, event.processedTokens);
                }
            assert.ok(tokens <= 32, `step ${index} evaluated ${tokens} tokens of the long prompts' pieces`);
        }
        assert.ok((processed.get(a.id) ?? 0) > 4 * 32 && (processed.get(b.id) ?? 0) > 4 * 32, "both prompts went in pieces");
    });

    test("a short prompt arriving while a long one prefills is not held behind it", async () => {
        const [long, short] = await whileOneGenerates(async () => {
            const longRequest = engine.send({prompt: longPrompt, maxTokens: 2, ...greedy});
            while (!engine.events.some((e) => e.id === longRequest.id && e.kind === "prefilled" && e.processedTokens > 0))
                await new Promise((resolve) => setTimeout(resolve, 1));
            const shortRequest = engine.send({prompt: "the cat sat", maxTokens: 2, ...greedy});
            return [{id: longRequest.id, ...await longRequest.done}, {id: shortRequest.id, ...await shortRequest.done}];
        });
        assert.ok(long.finished.promptTokens > 4 * 32, `the long prompt has ${long.finished.promptTokens} tokens`);
        assert.ok(firstTokenStep(short.id) < firstTokenStep(long.id),
            `the short prompt's first token came in step ${firstTokenStep(short.id)}, the long one's in ${firstTokenStep(long.id)}`);
    });
});

describe("chunked prefill's last piece on the CPU", () => {
    const budget = 128;
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({parallel: 2, prefillChunkTokens: budget, prefixCache: false});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    test("is never too short for the attention tiles and long enough to cost more without them: the piece before leaves a tile", async () => {
        const running = engine.send({prompt: "once upon a time", maxTokens: 900, ...greedy});
        while (!engine.events.some((e) => e.id === running.id && (e.kind === "tokens" || e.kind === "finished")))
            await new Promise((resolve) => setTimeout(resolve, 5));
        assert.ok(engine.events.some((e) => e.id === running.id && e.kind === "tokens"), "the running request generates");
        const lasts: {tokens: number, unshaped: number, last: number}[] = [];
        try {
            for (const extra of [0, 6, 12, 18, 24]) {
                const request = engine.send({prompt: `${longPrompt}${" and the dog ran".repeat(extra)}`, maxTokens: 1, ...greedy});
                const {finished} = await request.done;
                const processed = engine.events.flatMap((e) => e.id === request.id && e.kind === "prefilled" ? [e.processedTokens] : []);
                // Pieces of the whole budget would leave this many for the last step.
                let unshaped = finished.promptTokens;
                while (unshaped > budget)
                    unshaped -= budget;
                lasts.push({tokens: finished.promptTokens, unshaped, last: finished.promptTokens - processed.at(-1)!});
            }
        } finally {
            engine.engine.handle({type: "cancel", id: running.id});
            await running.done;
        }
        // Beside the running request's decodes a tile is 65 of the prompt's tokens.
        const tile = tileFillingTokens(false);
        const short = (n: number): boolean => n * 3.5 > tile && n < tile;
        assert.ok(lasts.some(({unshaped}) => short(unshaped)), `a prompt whose last piece would be short: ${JSON.stringify(lasts)}`);
        assert.ok(lasts.some(({unshaped}) => !short(unshaped)), JSON.stringify(lasts));
        for (const {tokens, unshaped, last} of lasts)
            assert.equal(last, short(unshaped) ? tile : unshaped, `${tokens} tokens: ${JSON.stringify(lasts)}`);
    });
});

describe("chunked prefill's last piece on two threads", () => {
    const budget = 128;
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({parallel: 2, prefillChunkTokens: budget, prefixCache: false, threads: 2});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    test("is made a tile only where an untiled one costs more than the tiles ggml's chunks leave", async () => {
        // The tiny model's heads on two threads: chunks cut each head's tile in two.
        const waste = tileWaste(tiledAttentionQueries, demoModelSizes.tiny.shape.headCount, 2);
        assert.equal(waste, 2);
        const tile = tileFillingTokens(false);
        const running = engine.send({prompt: "once upon a time", maxTokens: 900, ...greedy});
        while (!engine.events.some((e) => e.id === running.id && (e.kind === "tokens" || e.kind === "finished")))
            await new Promise((resolve) => setTimeout(resolve, 5));
        const lasts = new Map<number, number>();
        try {
            // 30 left: one query at a time costs more than one thread's tile, less than two threads'; 50: more than both.
            for (const left of [30, 50]) {
                const promptTokens = Array.from({length: 2 * budget + left}, (_, i) => 300 + (i * 7) % 200);
                const request = engine.send({promptTokens, maxTokens: 1, ...greedy});
                const {finished} = await request.done;
                const processed = engine.events.flatMap((e) => e.id === request.id && e.kind === "prefilled" ? [e.processedTokens] : []);
                lasts.set(left, finished.promptTokens - processed.at(-1)!);
            }
        } finally {
            engine.engine.handle({type: "cancel", id: running.id});
            await running.done;
        }
        assert.ok(30 * 3.5 > tile && 30 * 3.5 < tile * waste && 50 * 3.5 > tile * waste, "the cases straddle the rule");
        assert.deepEqual(Object.fromEntries(lasts), {30: 30, 50: tile});
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
