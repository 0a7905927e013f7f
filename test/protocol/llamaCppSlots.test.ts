/**
 * The `/slots` contract's reader (protocol/llamaCppSlots.ts), on answers of the shapes llama.cpp's server versions give,
 * and the engine's `scheduled` event's sequence and `prefilled` event's count as they are validated on arrival.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {parseEngineToHost} from "../../protocol/engineMessages.js";
import {parseLlamaCppSlots} from "../../protocol/llamaCppSlots.js";
import {ProtocolError} from "../../protocol/validation.js";

describe("llama.cpp's /slots answer, read", () => {
    test("this llama.cpp's answer: an idle slot, a busy one (n_prompt_tokens is what it holds)", () => {
        const answer = [{id: 0, n_ctx: 512, speculative: false, is_processing: false},
            {id: 1, n_ctx: 512, speculative: false, is_processing: true, id_task: 11, n_prompt_tokens: 366, n_prompt_tokens_processed: 1,
                n_prompt_tokens_cache: 4, params: {temperature: 0}, next_token: [{has_next_token: true, has_new_line: true, n_remain: 39, n_decoded: 361}]}];
        assert.deepEqual(parseLlamaCppSlots(answer), [{id: 0, nCtx: 512, processing: false, promptTokens: 0, decoded: 0},
            {id: 1, nCtx: 512, processing: true, promptTokens: 366, decoded: 361}]);
    });

    test("an older answer without ids or next_token reads with zeros", () => {
        assert.deepEqual(parseLlamaCppSlots([{n_ctx: 4096, is_processing: false}]), [{id: 0, nCtx: 4096, processing: false, promptTokens: 0, decoded: 0}]);
    });

    test("malformed answers: a ProtocolError naming what is wrong", () => {
        assert.throws(() => parseLlamaCppSlots({slots: []}), (error: unknown) => error instanceof ProtocolError && /not a list/.test(error.message));
        assert.throws(() => parseLlamaCppSlots([{n_ctx: 512}]), /\/slots\[0\]\.is_processing: expected a boolean/);
        assert.throws(() => parseLlamaCppSlots([{n_ctx: "512", is_processing: true}]), /\/slots\[0\]\.n_ctx/);
        assert.throws(() => parseLlamaCppSlots([{n_ctx: 1, is_processing: true, next_token: [{n_decoded: 1.5}]}]), /next_token\[0\]\.n_decoded/);
        assert.throws(() => parseLlamaCppSlots(Array.from({length: 5000}, () => ({n_ctx: 1, is_processing: false}))), /5000 slots/);
    });
});

describe("the engine's scheduled event", () => {
    const outputs = (event: object): unknown => ({type: "outputs", events: [{kind: "scheduled", id: "a", t: 1, cachedTokens: 0, ...event}],
        step: {t: 1, running: 1, waiting: 0, stepTokens: 0, kvUsedTokens: 0, kvCapacityTokens: 8}});

    test("carries the sequence it put the request on", () => {
        const message = parseEngineToHost(outputs({sequence: 3}));
        assert.ok(message.type === "outputs");
        assert.deepEqual(message.events[0], {kind: "scheduled", id: "a", t: 1, cachedTokens: 0, sequence: 3});
        assert.equal((parseEngineToHost(outputs({})) as {events: Array<{sequence?: number}>}).events[0]!.sequence, undefined, "an embedding has none");
    });

    test("a sequence that is not an index is refused", () => {
        assert.throws(() => parseEngineToHost(outputs({sequence: -1})), /sequence: -1 is not a sequence index/);
        assert.throws(() => parseEngineToHost(outputs({sequence: 0.5})), /sequence/);
    });
});

describe("the engine's prefilled event", () => {
    const outputs = (event: object): unknown => ({type: "outputs", events: [{kind: "prefilled", id: "a", t: 1, ...event}],
        step: {t: 1, running: 1, waiting: 0, stepTokens: 128, kvUsedTokens: 128, kvCapacityTokens: 1024}});

    test("carries the prompt tokens held so far", () => {
        const message = parseEngineToHost(outputs({processedTokens: 128}));
        assert.ok(message.type === "outputs");
        assert.deepEqual(message.events[0], {kind: "prefilled", id: "a", t: 1, processedTokens: 128});
    });

    test("a count that is not one is refused", () => {
        assert.throws(() => parseEngineToHost(outputs({processedTokens: -1})), /processedTokens: -1 is negative/);
        assert.throws(() => parseEngineToHost(outputs({processedTokens: 1.5})), /processedTokens/);
        assert.throws(() => parseEngineToHost(outputs({})), /processedTokens/);
    });
});
