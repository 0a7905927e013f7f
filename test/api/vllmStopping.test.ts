/**
 * vLLM's sampling fields about where an answer ends, through the official `openai` client on a real engine (the tiny
 * model, greedy so each case knows the text it would otherwise write): `stop_token_ids`, `min_tokens` (which keeps the
 * end of text, stop ids and stop strings from ending the answer early), `include_stop_str_in_output`, `stop_reason` in the
 * answer; and their refusals.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

type Params = OpenAI.CompletionCreateParamsNonStreaming & Record<string, unknown>;
/** vLLM's fields on a choice (the SDK does not type them). */
type Choice = OpenAI.CompletionChoice & {token_ids?: number[], stop_reason?: string | number | null};

/** The demo models' end-of-sequence token (llama's `</s>`). */
const eos = 2;

describe("vLLM's stop_token_ids, min_tokens, include_stop_str_in_output", () => {
    const api = apiForSuite({mode: "inProcess"});
    const complete = async (extra: Record<string, unknown>): Promise<{choice: Choice, usage: OpenAI.CompletionUsage}> => {
        const completion = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 24, temperature: 0,
            return_token_ids: true, ...extra} as Params);
        return {choice: completion.choices[0] as Choice, usage: completion.usage!};
    };

    test("stop_token_ids: the answer ends with the first listed token, which is part of it", async () => {
        const greedy = (await complete({ignore_eos: true})).choice.token_ids!;
        const at = greedy.findIndex((token, i) => i >= 3 && !greedy.slice(0, i).includes(token));
        assert.ok(at > 0, `a token that first occurs after the third: ${greedy.join(",")}`);
        const {choice} = await complete({ignore_eos: true, stop_token_ids: [greedy[at]!]});
        assert.deepEqual(choice.token_ids, greedy.slice(0, at + 1));
        assert.equal(choice.finish_reason, "stop");
        assert.equal(choice.stop_reason, greedy[at], "vLLM's stop_reason: the stop token id");
        const stream = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 24, temperature: 0,
            ignore_eos: true, stop_token_ids: [greedy[at]!], stream: true} as OpenAI.CompletionCreateParamsStreaming);
        let streamedReason: unknown;
        for await (const chunk of stream)
            if (chunk.choices[0]?.finish_reason !== null && chunk.choices[0] !== undefined)
                streamedReason = (chunk.choices[0] as Choice).stop_reason;
        assert.equal(streamedReason, greedy[at], "in the streamed chunk with the finish reason");
    });

    test("min_tokens: the end of text (forced here) and stop ids wait for it; stop strings do not end the answer before it", async () => {
        const forcedEnd = {logit_bias: {[eos]: 100}};
        assert.equal((await complete(forcedEnd)).usage.completion_tokens, 1, "the forced end of text comes first");
        const held = await complete({...forcedEnd, min_tokens: 5});
        assert.equal(held.usage.completion_tokens, 6, "five tokens, then the end of text");
        assert.equal(held.choice.token_ids!.at(-1), eos);
        assert.ok(!held.choice.token_ids!.slice(0, 5).includes(eos));
        assert.equal(held.choice.finish_reason, "stop");
        assert.equal(held.choice.stop_reason, null, "the end of text is no stop string or stop id");

        const greedy = await complete({ignore_eos: true});
        const text = greedy.choice.text;
        const stop = text.slice(0, 2);
        assert.equal((await complete({ignore_eos: true, stop: [stop]})).choice.text, "", "the stop string at the start ends it at once");
        const late = await complete({ignore_eos: true, stop: [stop], min_tokens: 8});
        assert.ok(late.choice.text.startsWith(stop) && late.usage.completion_tokens >= 8, JSON.stringify(late.choice.text));
    });

    test("include_stop_str_in_output: the stop string ends the text instead of being cut", async () => {
        const text = (await complete({ignore_eos: true})).choice.text;
        const stop = text.slice(6, 9);
        const cut = text.indexOf(stop);
        assert.equal((await complete({ignore_eos: true, stop: [stop]})).choice.text, text.slice(0, cut));
        const kept = await complete({ignore_eos: true, stop: [stop], include_stop_str_in_output: true});
        assert.equal(kept.choice.text, text.slice(0, cut + stop.length));
        assert.equal(kept.choice.finish_reason, "stop");
        assert.equal(kept.choice.stop_reason, stop);
    });

    test("refused with a 400 naming the field; priority is taken", async () => {
        const cases: Array<[Record<string, unknown>, string, RegExp]> = [
            [{stop_token_ids: [1_000_000]}, "stop_token_ids", /not in the model's vocabulary/],
            [{stop_token_ids: [-1]}, "stop_token_ids", /non-negative integers/],
            [{min_tokens: 30}, "min_tokens", /must not exceed max_tokens/],
            [{min_tokens: 2, response_format: {type: "json_object"}}, "min_tokens", /cannot be used with a grammar/]
        ];
        for (const [extra, param, message] of cases)
            await assert.rejects(api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 24,
                ...extra} as OpenAI.ChatCompletionCreateParamsNonStreaming), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${String(error)}`);
                assert.equal(error.param, param, JSON.stringify(extra));
                assert.match(error.message, message);
                return true;
            });
        assert.equal((await complete({priority: -5, max_tokens: 3, ignore_eos: true})).usage.completion_tokens, 3);
    });
});
