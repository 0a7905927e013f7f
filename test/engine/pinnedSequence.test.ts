/**
 * Requests pinned to one sequence (GenerateRequest.sequence, llama.cpp's `id_slot`) on real node-llama-cpp: a pinned
 * request waits for its sequence while later requests start on the others, runs there with the prefix it holds, and a
 * sequence that does not exist is refused.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import type {RequestEvent} from "../../protocol/engineMessages.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";

const greedy = {temperature: 0, ignoreEos: true} as const;
const story = "Once upon a time there was a little girl who lived in a small house near the big park with her dog";

describe("requests pinned to a sequence", () => {
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({prefixCache: true, parallel: 2});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    /** Where `kind` happened for request `id` in the engine's event order, and that event. */
    function find<K extends RequestEvent["kind"]>(id: string, kind: K): {index: number, event: Extract<RequestEvent, {kind: K}>} {
        const index = engine.events.findIndex((event) => event.id === id && event.kind === kind);
        assert.ok(index >= 0, `no ${kind} event for ${id}`);
        return {index, event: engine.events[index] as Extract<RequestEvent, {kind: K}>};
    }

    test("a request pinned to a busy sequence waits for it, while a later request starts on the free one", async () => {
        const first = engine.send({prompt: "The dog ran to the park", maxTokens: 48, sequence: 0, ...greedy});
        const pinned = engine.send({prompt: "The cat sat on the mat", maxTokens: 8, sequence: 0, ...greedy});
        const later = engine.send({prompt: "A bird flew over the house", maxTokens: 8, ...greedy});
        await Promise.all([first.done, pinned.done, later.done]);

        assert.equal(find(first.id, "scheduled").event.sequence, 0);
        assert.equal(find(pinned.id, "scheduled").event.sequence, 0, "the pinned request ran on its sequence");
        assert.equal(find(later.id, "scheduled").event.sequence, 1, "the later request took the free sequence");
        const firstFinished = find(first.id, "finished").index;
        assert.ok(find(pinned.id, "scheduled").index > firstFinished, "the pinned request waited until its sequence was free");
        assert.ok(find(later.id, "scheduled").index < firstFinished, "the later request did not wait behind the pinned one");
    });

    test("a pinned request reuses the prefix its sequence holds, and only that sequence's", async () => {
        const onOne = await engine.generate({prompt: story, maxTokens: 4, sequence: 1, ...greedy});
        assert.equal(onOne.finished.reason, "length");
        const again = await engine.generate({prompt: story, maxTokens: 4, sequence: 1, ...greedy});
        assert.equal(again.cachedTokens, again.finished.promptTokens - 1, "its own sequence holds the story");
        const elsewhere = await engine.generate({prompt: story, maxTokens: 4, sequence: 0, ...greedy});
        assert.ok(elsewhere.cachedTokens < 3, `sequence 0 does not hold the story (${elsewhere.cachedTokens} cached)`);
        assert.equal(elsewhere.text, again.text, "the same greedy output either way");
    });

    test("a sequence that does not exist is refused as an invalid request", async () => {
        const refused = await engine.generate({prompt: story, maxTokens: 4, sequence: 2, ...greedy});
        assert.equal(refused.finished.reason, "error");
        assert.equal(refused.finished.errorCode, "invalid_request");
        assert.match(refused.finished.error ?? "", /sequence 2 does not exist: this engine runs 2/);
    });
});
