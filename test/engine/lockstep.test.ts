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

// Process mode, the default: there the host's messages cross a pipe, which is what could split a burst.
// In-process, where the host calls the engine directly, one CI run saw a wave's first tokens in three steps
// (round 4 of 8, under the full suite's load; not reproduced in 32 rounds alone): a rare race, not understood yet.
describe("lockstep (process)", () => {
    test("4 requests sent in one event-loop turn reach the engine together: first tokens in one step, finished in one step", async () => {
        const client = new EngineClient({mode: "process", modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 4,
            statsIntervalMs: 0, prefixCache: false});
        await client.start();
        try {
            // Repeated: the engine process reads its pipe whenever data arrives, so separate writes split a burst by chance.
            for (let round = 0; round < 8; round++) {
                const handles = [0, 1, 2, 3].map((i) => client.generate({prompt: `${sentence.repeat(2)} ${round} ${i}`, maxTokens,
                    ignoreEos: true, temperature: 0.8, seed: i}));
                const results = await Promise.all(handles.map((handle) => handle.done));
                assert.deepEqual(results.map((r) => r.generatedTokens), [maxTokens, maxTokens, maxTokens, maxTokens]);
                // One outputs message is one step, and every event in it is delivered at the same host time.
                assert.equal(new Set(results.map((r) => r.firstDelivered)).size, 1, `round ${round}: first tokens in different steps`);
                assert.equal(new Set(results.map((r) => r.lastDelivered)).size, 1, `round ${round}: finished in different steps`);
            }
        } finally {
            await client.stop();
        }
    });
});

describe("lockstep (engine)", () => {
    test("requests arriving while the first one's prompt evaluates go in whole, and its second token waits for them", async () => {
        const engine = await EngineUnderTest.start({parallel: 4, prefixCache: false});
        try {
            const first = engine.send({prompt: sentence.repeat(25).trim(), maxTokens, ignoreEos: true, temperature: 0});
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
