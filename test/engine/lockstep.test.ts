/**
 * Requests decode in lockstep from their first token on when they arrive together, or while the first
 * one's prompt is still evaluating: their prompts go in one batch (or the first one's second token waits
 * for the others' prompts), so equal requests also finish in one step. Real node-llama-cpp, the tiny model.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";
import {tinyModelPath} from "../helpers/testModels.js";

const sentence = "the little girl saw a big red ball in the park and ran after it with her happy dog under the blue sky ";
const maxTokens = 24;

/**
 * Rounds of 4 requests sent in one event-loop turn: first tokens in one step, finished in one step. `prompt(round, i)`:
 * each request's prompt; `options`: the engine's caching.
 */
async function assertRoundsInLockstep(mode: "process" | "inProcess", options: {prefixCache: boolean, promptCacheMiB?: number},
                                      prompt: (round: number, i: number) => string): Promise<void> {
    const client = new EngineClient({mode, modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 4,
        statsIntervalMs: 0, ...options});
    await client.start();
    // What the stats see: the generated tokens of each step the host received (vllm:iteration_tokens_total per step).
    const stepTokens: number[] = [];
    client.observe({onOutputs: (step) => {
        if (step.scheduler !== undefined && step.iteration.generationTokens > 0)
            stepTokens.push(step.iteration.generationTokens);
    }});
    try {
        // Repeated: the engine process reads its pipe whenever data arrives, so separate writes split a burst by chance.
        for (let round = 0; round < 8; round++) {
            stepTokens.length = 0;
            const handles = [0, 1, 2, 3].map((i) => client.generate({prompt: prompt(round, i), maxTokens,
                ignoreEos: true, temperature: 0.8, seed: i}));
            const results = await Promise.all(handles.map((handle) => handle.done));
            assert.deepEqual(results.map((r) => r.generatedTokens), [maxTokens, maxTokens, maxTokens, maxTokens]);
            // One outputs message is one step, and every event in it is delivered at the same host time.
            assert.equal(new Set(results.map((r) => r.firstDelivered)).size, 1, `round ${round}: first tokens in different steps`);
            assert.equal(new Set(results.map((r) => r.lastDelivered)).size, 1, `round ${round}: finished in different steps`);
            assert.deepEqual(stepTokens, Array.from({length: maxTokens}, () => 4), `round ${round}: the host saw steps of ${stepTokens.join(", ")} tokens`);
        }
    } finally {
        await client.stop();
    }
}

// Both modes: in process mode the host's messages cross a pipe, which could split a burst; in both, a step's
// tokens used to go out in several outputs messages when its samples finished in separate turns (see below).
for (const mode of ["process", "inProcess"] as const) describe(`lockstep (${mode})`, () => {
    test("4 requests sent in one event-loop turn reach the engine together: first tokens in one step, finished in one step", async () => {
        await assertRoundsInLockstep(mode, {prefixCache: false}, (round, i) => `${sentence.repeat(2)} ${round} ${i}`);
    });
});

describe("lockstep with the prompt cache", () => {
    test("each round saves the previous round's 4 sequences first; its 4 prompts still go in one batch", async () => {
        // Prompts that differ from their first words: every sequence keeps under half of what it holds, so each request
        // saves it before its prompt goes in. Those saves end at different times; the prompts must not go in one by one.
        await assertRoundsInLockstep("process", {prefixCache: true, promptCacheMiB: 64}, (round, i) => `${round} ${i} ${sentence.repeat(4)}`);
    });
});

/** A's first token was sampled before B's and went out (its outputs message) before B's was sampled: it did not wait for B's batch. */
function assertFirstTokenSentBefore(engine: EngineUnderTest, a: string, b: string): void {
    const firstToken = (id: string) => engine.events.find((e) => e.kind === "tokens" && e.id === id);
    const sentAt = (id: string) => engine.stepTimes[engine.steps.findIndex((events) => events.some((e) => e.kind === "tokens" && e.id === id))]!;
    const aFirst = firstToken(a), bFirst = firstToken(b);
    assert.ok(aFirst?.kind === "tokens" && bFirst?.kind === "tokens");
    assert.ok(aFirst.times[0]! < bFirst.times[0]!, "B's first token came first: the test's premise does not hold");
    assert.ok(sentAt(a) < bFirst.times[0]!, `A's first token (sampled ${(bFirst.times[0]! - aFirst.times[0]!).toFixed(1)} ms before B's) ` +
        `went out ${(sentAt(a) - bFirst.times[0]!).toFixed(1)} ms after B's was sampled`);
}

describe("lockstep (engine)", () => {
    test("requests arriving while the first one's prompt evaluates go in whole, and its second token waits for them", async () => {
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: false});
        try {
            // Its prompt (961 tokens with BOS) and output fit the 1024-token sequence.
            const first = engine.send({prompt: sentence.repeat(24).trim(), maxTokens, ignoreEos: true, temperature: 0});
            // Its prompt is now queued and dispatched to llama.cpp; the others arrive while it evaluates.
            await new Promise((resolve) => setImmediate(resolve));
            await new Promise((resolve) => setImmediate(resolve));
            assert.ok(!engine.events.some((e) => e.id === first.id && e.kind === "tokens"), "the first prompt had already been evaluated");
            const others = [1, 2, 3].map((i) => engine.send({prompt: `${sentence} ${i}`, maxTokens, ignoreEos: true, temperature: 0}));
            const outcomes = await Promise.all([first, ...others].map((r) => r.done));
            for (const outcome of outcomes)
                assert.equal(outcome.finished.generatedTokens, maxTokens);
            const tokenTimes = (id: string) => engine.events.flatMap((e) => e.kind === "tokens" && e.id === id ? e.times : []);
            const lastFirstToken = Math.max(...others.map((r) => tokenTimes(r.id)[0]!));
            assert.ok(tokenTimes(first.id)[1]! > lastFirstToken,
                "the first request decoded its second token before the later prompts were evaluated: they rode its steps");
            // Whole prompts, then lockstep (each has its first token when the first step that decodes starts): all four finish in one step.
            const finishStep = (id: string) => engine.steps.findIndex((events) => events.some((e) => e.kind === "finished" && e.id === id));
            const steps = [first, ...others].map((r) => finishStep(r.id));
            assert.ok(steps.every((step) => step >= 0 && step === steps[0]), `finished in steps ${steps.join(", ")}`);
        } finally {
            await engine.engine.dispose();
        }
    });
});

describe("a wave's end (engine)", () => {
    test("with the prefix cache on, the requests waiting for sequences start together once a wave ends in one step, " +
        "after its last tokens went out", async () => {
        // Sequences keep their tokens, so each is free the moment its request handles its last token. The waiting requests
        // used to start then, one by one while the rest of the wave was ending: the first one's prompt went in alone, and
        // the next ones' joined held the wave's last outputs.
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: true, promptCacheMiB: 0});
        try {
            for (let round = 0; round < 3; round++) {
                const before = engine.steps.length;
                const requests = Array.from({length: 8}, (_, i) => engine.send({prompt: `${round * 8 + i} ${sentence.repeat(2)}`, maxTokens,
                    ignoreEos: true, temperature: 0.8, seed: i}));
                await Promise.all(requests.map((r) => r.done));
                const stepOf = (id: string, kind: "tokens" | "finished") =>
                    before + engine.steps.slice(before).findIndex((events) => events.some((e) => e.kind === kind && e.id === id));
                const ends = requests.slice(0, 4).map((r) => stepOf(r.id, "finished"));
                const starts = requests.slice(4).map((r) => stepOf(r.id, "tokens"));
                assert.ok(ends.every((step) => step >= before && step === ends[0]), `round ${round}: the first wave finished in steps ${ends.join(", ")}`);
                assert.ok(starts.every((step) => step > ends[0]! && step === starts[0]),
                    `round ${round}: the second wave's first tokens came in steps ${starts.join(", ")} (the first wave ended in ${ends[0]})`);
                const firstSampled = Math.min(...requests.slice(4).map((r) => {
                    const first = engine.events.find((e) => e.kind === "tokens" && e.id === r.id);
                    return first?.kind === "tokens" ? first.times[0]! : Infinity;
                }));
                assert.ok(engine.stepTimes[ends[0]!]! < firstSampled, `round ${round}: the first wave's last outputs went out ` +
                    `${(engine.stepTimes[ends[0]!]! - firstSampled).toFixed(1)} ms after the second wave's first token`);
            }
        } finally {
            await engine.engine.dispose();
        }
    });
});

describe("one outputs message per step (engine)", () => {
    test("every message that carries tokens carries one token of each running request, also in the step where some finish", async () => {
        // node-llama-cpp samples each sequence in its own native task, and those finish in separate event-loop
        // turns; the engine used to send whatever had arrived two turns after the first token, so one step of
        // 4 requests went out as several messages (~3 per step with one libuv thread, the engine process's
        // setting), which the host's iteration-tokens histogram counted as several small iterations.
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: false});
        try {
            const lengths = [8, 16, 24, 24];
            // Repeated: whether a sample ends a turn late is chance (with the tiny model's small vocabulary, a few steps per round).
            for (let round = 0; round < 4; round++) {
                const before = engine.steps.length;
                const requests = lengths.map((length, i) => engine.send({prompt: `${sentence} ${round} ${i}`, maxTokens: length, ignoreEos: true,
                    temperature: 0.8, seed: i}));
                await Promise.all(requests.map((r) => r.done));
                const tokenSteps = engine.steps.slice(before).map((events) => events.filter((e) => e.kind === "tokens"))
                    .filter((tokens) => tokens.length > 0);
                assert.equal(tokenSteps.length, maxTokens, `round ${round}: ${tokenSteps.length} messages carried the tokens of ${maxTokens} steps`);
                tokenSteps.forEach((tokens, step) => {
                    const expected = lengths.filter((length) => length > step).length;
                    assert.equal(tokens.length, expected, `round ${round}, step ${step}: tokens of ${tokens.length} requests, ${expected} running`);
                    assert.ok(tokens.every((e) => e.kind === "tokens" && e.times.length === 1), `round ${round}, step ${step}: a request with more than one token`);
                });
            }
        } finally {
            await engine.engine.dispose();
        }
    });

    test("a burst that overflows one batch: the first tokens of the prompts that fit go out without waiting for the rest", async () => {
        // Both prompts are submitted in one turn, but together they exceed the batch: node-llama-cpp evaluates A's
        // (short) prompt and part of B's, samples A's first token, and evaluates the rest of B's in the next batch.
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: false});
        try {
            const a = engine.send({prompt: sentence, maxTokens: 4, ignoreEos: true, temperature: 0});
            const b = engine.send({prompt: sentence.repeat(12), maxTokens: 4, ignoreEos: true, temperature: 0});
            const [outcomeA, outcomeB] = await Promise.all([a.done, b.done]);
            const batchSize = 512; // node-llama-cpp's default: min(context size × sequences, 512)
            assert.ok(outcomeA.finished.promptTokens + outcomeB.finished.promptTokens > batchSize,
                `${outcomeA.finished.promptTokens} + ${outcomeB.finished.promptTokens} prompt tokens fit one batch of ${batchSize}: the test's premise does not hold`);
            assertFirstTokenSentBefore(engine, a.id, b.id);
        } finally {
            await engine.engine.dispose();
        }
    });

    test("tokens already sampled do not wait for a prompt that evaluates in a later batch", async () => {
        // A's prompt is in flight when B arrives; B's prompt (under one batch) goes in whole and B joins the
        // steps, so A's second token waits for B's first. A's first token is sampled, though, and goes out
        // after at most a few ms, not when B's prompt is done.
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: false});
        try {
            const a = engine.send({prompt: sentence, maxTokens: 4, ignoreEos: true, temperature: 0});
            await new Promise((resolve) => setImmediate(resolve));
            await new Promise((resolve) => setImmediate(resolve));
            const b = engine.send({prompt: sentence.repeat(12), maxTokens: 4, ignoreEos: true, temperature: 0});
            const [, outcomeB] = await Promise.all([a.done, b.done]);
            assert.ok(outcomeB.finished.promptTokens > 400 && outcomeB.finished.promptTokens <= 512, `B's prompt: ${outcomeB.finished.promptTokens} tokens`);
            assertFirstTokenSentBefore(engine, a.id, b.id);
        } finally {
            await engine.engine.dispose();
        }
    });
});
