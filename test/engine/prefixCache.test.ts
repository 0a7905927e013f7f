/**
 * Prefix caching in the engine, on real node-llama-cpp: a request whose prompt starts like an earlier
 * one on a free sequence evaluates only the rest, the `scheduled` event says how many tokens it reused,
 * and the output is exactly what a cold engine (caching off) generates for the same greedy request.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";

const story = "Once upon a time there was a little girl who lived in a small house near the big park with her dog and her cat. " +
    "Every day she went to the park to play with her friends and the dog ran after the red ball under the blue sky";
const greedy = {temperature: 0, maxTokens: 24, ignoreEos: true} as const;

/**
 * The tokens greedy decoding gives after the story on `cold` (the prompt's and the generated ids), and a stop string that
 * first shows up with the 10th token: a request with it ends on that token, which the engine decoded before it found the
 * stop string in its text; `before`, the text out before it.
 */
async function stopAtTenthToken(cold: EngineUnderTest): Promise<{promptIds: number[], generated: number[], stop: {text: string, before: string}}> {
    const coldRun = cold.send({prompt: story, ...greedy, returnTokenIds: true});
    const coldOutcome = await coldRun.done;
    const prompt = cold.events.find((event) => event.id === coldRun.id && event.kind === "inputProcessed");
    const promptIds = prompt?.kind === "inputProcessed" ? prompt.promptTokenIds ?? [] : [];
    const generated: number[] = [];
    const pieces: string[] = [];
    for (const event of cold.events)
        if (event.id === coldRun.id && event.kind === "tokens")
            for (const [i, id] of (event.ids ?? []).entries()) {
                generated.push(id);
                pieces.push((pieces.at(-1) ?? "") + (i === 0 ? event.text : ""));
            }
    assert.equal(generated.length, greedy.maxTokens);
    const text = pieces[9]!.slice(pieces[8]!.length);
    assert.ok(text.trim().length > 0 && !pieces[8]!.includes(text) && coldOutcome.text.startsWith(pieces[9]!),
        `token 10's text ${JSON.stringify(text)} must be new there`);
    return {promptIds, generated, stop: {text, before: pieces[8]!}};
}

describe("prefix caching", () => {
    let cached: EngineUnderTest;
    let cold: EngineUnderTest;

    before(async () => {
        cached = await EngineUnderTest.start({prefixCache: true, parallel: 1});
        cold = await EngineUnderTest.start({prefixCache: false, parallel: 1});
    });
    after(async () => {
        await cached.engine.dispose();
        await cold.engine.dispose();
    });

    test("a prompt that extends an earlier one reuses its tokens and generates exactly what a cold engine does", async () => {
        const first = await cached.generate({prompt: story, ...greedy});
        assert.equal(first.finished.reason, "length");
        assert.equal(first.cachedTokens, 0, "nothing is cached before the first request");

        const longer = `${story} and then they all went home`;
        const second = await cached.generate({prompt: longer, ...greedy});
        const reference = await cold.generate({prompt: longer, ...greedy});
        assert.equal(second.finished.reason, "length");
        assert.equal(reference.cachedTokens, 0, "caching off: nothing reused");
        // The whole first prompt is shared (its last token may tokenize differently once followed by more text).
        assert.ok(second.cachedTokens >= first.finished.promptTokens - 2 && second.cachedTokens < second.finished.promptTokens,
            `cached ${second.cachedTokens} of ${second.finished.promptTokens} (first prompt: ${first.finished.promptTokens})`);
        assert.equal(second.text, reference.text, "a reused prefix must not change greedy output");
        // Only the uncached part is evaluated: prompt tail + the generated tokens (the last one is sampled, not evaluated).
        assert.equal(second.stepTokens, second.finished.promptTokens - second.cachedTokens + greedy.maxTokens);
        assert.equal(reference.stepTokens, reference.finished.promptTokens + greedy.maxTokens);
    });

    test("the same prompt again reuses all but its last token", async () => {
        const again = await cached.generate({prompt: story, ...greedy});
        const reference = await cold.generate({prompt: story, ...greedy});
        assert.equal(again.cachedTokens, again.finished.promptTokens - 1);
        assert.equal(again.text, reference.text);
    });

    test("a request alone that a stop string ends leaves its last token decoded (decoded ahead), and the next one reuses it", async () => {
        const {promptIds, generated, stop} = await stopAtTenthToken(cold);
        const stopped = await cached.generate({prompt: story, ...greedy, stop: [stop.text]});
        assert.equal(stopped.finished.reason, "stop");
        assert.equal(stopped.text, stop.before);
        // Its prompt and all 10 tokens are on the sequence: a prompt that continues them reuses every one.
        const next = {promptTokens: [...promptIds, ...generated.slice(0, 16)], ...greedy, maxTokens: 4};
        const continued = await cached.generate(next);
        assert.equal(continued.cachedTokens, promptIds.length + 10);
        assert.equal(continued.text, (await cold.generate(next)).text, "a token decoded ahead must hold what a cold engine computes");
    });

    test("an unrelated prompt, sharing only its BOS, is evaluated whole and still matches a cold engine", async () => {
        const other = "The sun was over the water and a bird flew home";
        const result = await cached.generate({prompt: other, ...greedy});
        const reference = await cold.generate({prompt: other, ...greedy});
        assert.equal(result.cachedTokens, 0, "a lone shared token is not reused");
        assert.equal(result.text, reference.text);
        // Two shared tokens are: BOS and the first word.
        const sameFirstWord = "The moon was over the hill and a cat sat down";
        const second = await cached.generate({prompt: sameFirstWord, ...greedy});
        assert.equal(second.cachedTokens, 2);
        assert.equal(second.text, (await cold.generate({prompt: sameFirstWord, ...greedy})).text);
    });
});

describe("prefix caching with several sequences", () => {
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({prefixCache: true, parallel: 2});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    test("a request goes to the free sequence holding its prefix", async () => {
        const a = "The little boy saw a big red ball in the park and ran after it with his friend the dog";
        const b = "A small bird flew over the house and the tree and said hello to the sun in the blue sky";
        // Both run at once, so they land on different sequences.
        await Promise.all([engine.generate({prompt: a, ...greedy}), engine.generate({prompt: b, ...greedy})]);
        const againB = await engine.generate({prompt: b, ...greedy});
        const againA = await engine.generate({prompt: a, ...greedy});
        assert.equal(againB.cachedTokens, againB.finished.promptTokens - 1, "b found its own sequence");
        assert.equal(againA.cachedTokens, againA.finished.promptTokens - 1, "a found its own sequence");
    });
});

describe("prefix caching: which sequence a request takes when none holds much of its prompt", () => {
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({prefixCache: true, parallel: 2});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    test("a prompt sharing a few leading tokens goes to an empty sequence, then to the least recently used, not to another " +
        "conversation's", async () => {
        const conversation = `${story} and then they all went home`;
        // The same first words as the conversation, then other text: a few shared tokens of many (under llama-server's 10 %).
        const sameOpening = "Once upon a time a small bird flew over the house and the tree and said hello to the sun in the blue sky, " +
            "then it sang a song to the children who walked to school along the river every morning";
        const sequenceOf = (id: string): number | undefined => {
            const event = engine.events.find((e) => e.id === id && e.kind === "scheduled");
            return event?.kind === "scheduled" ? event.sequence : undefined;
        };
        const first = engine.send({prompt: conversation, ...greedy});
        await first.done;
        const other = engine.send({prompt: sameOpening, ...greedy});
        const otherOutcome = await other.done;
        assert.ok(otherOutcome.finished.promptTokens > 30);
        assert.notEqual(sequenceOf(other.id), sequenceOf(first.id), "it went to the empty sequence");
        const again = await engine.generate({prompt: conversation, ...greedy});
        assert.equal(again.cachedTokens, again.finished.promptTokens - 1, "the conversation kept its cache");
        // Both hold tokens now; an unrelated prompt takes the least recently used one (the other's), not the conversation's.
        const third = engine.send({prompt: "A dog found a box in the garden", ...greedy});
        await third.done;
        assert.equal(sequenceOf(third.id), sequenceOf(other.id));
        const once = await engine.generate({prompt: conversation, ...greedy});
        assert.equal(once.cachedTokens, once.finished.promptTokens - 1);
    });
});

describe("prefix caching with requests stepping together", () => {
    let cached: EngineUnderTest;
    let cold: EngineUnderTest;

    before(async () => {
        // Three, not two: where a step of two goes as two batches (decodePairs.ts), two requests do not decode ahead.
        cached = await EngineUnderTest.start({prefixCache: true, parallel: 3});
        cold = await EngineUnderTest.start({prefixCache: false, parallel: 1});
    });
    after(async () => {
        await cached.engine.dispose();
        await cold.engine.dispose();
    });

    test("each step's tokens are decoded ahead once all are sampled: one that a stop string ends leaves its last token decoded, " +
        "and the next request reuses it", async () => {
        const {promptIds, generated, stop} = await stopAtTenthToken(cold);
        const together = [
            cached.send({prompt: story, ...greedy, stop: [stop.text]}),
            cached.send({prompt: "The sun was over the water and a bird flew home", ...greedy}),
            cached.send({prompt: "A small bird flew over the house and the tree", ...greedy})
        ];
        const [stopped, ...others] = await Promise.all(together.map((request) => request.done));
        assert.equal(stopped!.finished.reason, "stop");
        assert.equal(stopped!.text, stop.before);
        for (const other of others)
            assert.equal(other.finished.generatedTokens, greedy.maxTokens);
        // Its prompt and all 10 tokens are on its sequence, the 10th decoded in the step the others' tokens went in.
        const next = {promptTokens: [...promptIds, ...generated.slice(0, 16)], ...greedy, maxTokens: 4};
        const continued = await cached.generate(next);
        assert.equal(continued.cachedTokens, promptIds.length + 10);
        assert.equal(continued.text, (await cold.generate(next)).text, "a token decoded ahead must hold what a cold engine computes");
    });
});
