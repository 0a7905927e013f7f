/**
 * The sampling fields beyond temperature, top_p and seed, through the official `openai` client on a real
 * engine: top_k and min_p (vLLM's and llama.cpp's), logit_bias (OpenAI's), presence/frequency penalties
 * (OpenAI's), repetition_penalty / repeat_penalty and repeat_last_n (vLLM's, llama.cpp's). Each test
 * compares against the same request without the field, so a field the server ignored fails it.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

/** Fields beyond OpenAI's (the SDK passes unknown body fields through). */
type Extra = Record<string, unknown>;

describe("OpenAI-compatible endpoint: sampling fields", () => {
    const api = apiForSuite({mode: "inProcess"});

    async function complete(fields: Extra): Promise<{text: string, tokens: number}> {
        const completion = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 12, ignore_eos: true, ...fields} as
            OpenAI.CompletionCreateParamsNonStreaming);
        return {text: completion.choices[0]!.text, tokens: completion.usage!.completion_tokens};
    }

    test("top_k 1 and min_p 1 sample the most likely token: any seed at temperature 1.5 gives the greedy text", async () => {
        const greedy = (await complete({temperature: 0})).text;
        const free = await Promise.all([1, 2, 3].map(async (seed) => (await complete({temperature: 1.5, seed})).text));
        assert.ok(new Set(free).size > 1 || free[0] !== greedy, `plain sampling at 1.5 should not be greedy: ${JSON.stringify(free)}`);
        for (const seed of [1, 2, 3]) {
            assert.equal((await complete({temperature: 1.5, seed, top_k: 1})).text, greedy, `top_k 1, seed ${seed}`);
            assert.equal((await complete({temperature: 1.5, seed, min_p: 1})).text, greedy, `min_p 1, seed ${seed}`);
        }
        // vLLM's "all tokens" is −1, llama.cpp's 0: both sample freely again.
        for (const topK of [-1, 0])
            assert.notEqual((await complete({temperature: 1.5, seed: 1, top_k: topK})).text, greedy, `top_k ${topK}`);
    });

    test("logit_bias: +100 forces a token at any temperature; −100 bans, end-of-generation tokens included: all but one banned leaves that one", async () => {
        const forced = await complete({temperature: 1, seed: 4, logit_bias: {300: 100}});
        assert.equal(forced.tokens, 12);
        const piece = forced.text.slice(0, forced.text.length / 12);
        assert.ok(piece !== "" && forced.text === piece.repeat(12), `one piece repeated: ${JSON.stringify(forced.text)}`);

        const vocabularySize = api.client.info?.model.vocabularySize;
        assert.ok(vocabularySize !== undefined && vocabularySize <= 1024, `the tiny model lists its vocabulary: ${vocabularySize}`);
        const banned: Record<string, number> = {};
        for (let token = 0; token < vocabularySize; token++)
            if (token !== 300) banned[token] = -100;
        const onlyOne = await complete({temperature: 1, seed: 5, logit_bias: banned});
        assert.equal(onlyOne.text, piece.repeat(12));
        assert.notEqual((await complete({temperature: 1, seed: 5})).text, onlyOne.text);
    });

    test("presence, frequency and repetition penalties change greedy output over the window; repeat_last_n 0 turns them off", async () => {
        // Eight tokens forced: greedy picks among them by the model's own logits (here it repeats one of them), so
        // a penalty on what the window holds shows as soon as it lowers a repeated token below another.
        const pair = {temperature: 0, max_tokens: 16, logit_bias: Object.fromEntries(Array.from({length: 8}, (_, i) => [String(300 + i), 100]))};
        const plain = (await complete(pair)).text;
        for (const penalty of [{frequency_penalty: 2}, {presence_penalty: 2}, {repetition_penalty: 1.5}, {repeat_penalty: 1.5}]) {
            const penalized = (await complete({...pair, ...penalty})).text;
            assert.notEqual(penalized, plain, `${JSON.stringify(penalty)} changed nothing: ${JSON.stringify(plain)}`);
            assert.equal((await complete({...pair, ...penalty, repeat_last_n: 0})).text, plain, `${JSON.stringify(penalty)} with repeat_last_n 0`);
        }
        // The same setting under vLLM's and llama.cpp's names, and a window over the whole context.
        assert.equal((await complete({...pair, repetition_penalty: 1.5})).text, (await complete({...pair, repeat_penalty: 1.5})).text);
        assert.ok((await complete({...pair, frequency_penalty: 2, repeat_last_n: -1})).text !== "");
    });

    test("n choices: one request each, choice i sampled with seed + i; whole and streamed alike; usage counts the prompt once", async () => {
        const messages = [{role: "user" as const, content: "Tell me a story"}];
        const body = {model: "m", messages, max_tokens: 8, temperature: 1, seed: 40};
        const many = await api.openai.chat.completions.create({...body, n: 3});
        assert.deepEqual(many.choices.map((choice) => choice.index), [0, 1, 2]);
        const singles = await Promise.all([40, 41, 42].map((seed) => api.openai.chat.completions.create({...body, seed})));
        assert.deepEqual(many.choices.map((choice) => choice.message.content), singles.map((single) => single.choices[0]!.message.content));
        assert.ok(new Set(many.choices.map((choice) => choice.message.content)).size > 1, "different seeds, different answers");
        assert.equal(many.usage?.prompt_tokens, singles[0]!.usage?.prompt_tokens);
        assert.equal(many.usage?.completion_tokens, singles.reduce((sum, single) => sum + single.usage!.completion_tokens, 0));
        // Streamed: chunks of the choices interleave, each with its index; put together, the same answers.
        const texts = ["", "", ""];
        const finished = new Set<number>();
        let usage: OpenAI.CompletionUsage | undefined;
        for await (const chunk of await api.openai.chat.completions.create({...body, n: 3, stream: true, stream_options: {include_usage: true}})) {
            for (const choice of chunk.choices) {
                texts[choice.index] += choice.delta.content ?? "";
                if (choice.finish_reason !== null) finished.add(choice.index);
            }
            usage = chunk.usage ?? usage;
        }
        assert.deepEqual(texts, many.choices.map((choice) => choice.message.content));
        assert.deepEqual([...finished].sort(), [0, 1, 2]);
        assert.equal(usage?.completion_tokens, many.usage?.completion_tokens);
        const completions = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 6, temperature: 1, seed: 7, n: 2});
        const second = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 6, temperature: 1, seed: 8});
        assert.equal(completions.choices[1]!.text, second.choices[0]!.text);
        assert.deepEqual(completions.choices.map((choice) => choice.index), [0, 1]);
    });

    test("without a seed every request draws its own: n choices differ, and so do two requests sent together", async () => {
        // node-llama-cpp seeds with the current second by default: before each request drew its seed, these were all equal.
        const body = {model: "m", messages: [{role: "user" as const, content: "Tell me a story"}], max_tokens: 12, temperature: 1};
        const many = await api.openai.chat.completions.create({...body, n: 3});
        assert.equal(new Set(many.choices.map((choice) => choice.message.content)).size, 3, JSON.stringify(many.choices));
        const pair = await Promise.all([0, 1].map(async () => await api.openai.completions.create({model: "m", prompt: "Once upon a time",
            max_tokens: 12, temperature: 1})));
        assert.notEqual(pair[0].choices[0]!.text, pair[1].choices[0]!.text);
    });

    test("any integer seed, as vLLM's: negative ones are seeds of their own, and each repeats", async () => {
        // node-llama-cpp turns a negative seed into 0: before samplerSeed.ts, -1, -2 and 0 sampled alike.
        const text = async (seed: number) => (await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 12,
            temperature: 1, seed})).choices[0]!.text;
        const [minusOne, minusTwo, zero] = [await text(-1), await text(-2), await text(0)];
        assert.equal(new Set([minusOne, minusTwo, zero]).size, 3, JSON.stringify([minusOne, minusTwo, zero]));
        assert.equal(await text(-1), minusOne, "-1 is a seed, not llama.cpp's 'random'");
        assert.equal(await text(2 ** 40 + 3), await text(2 ** 40 + 3));
    });

    test("logprobs without alternatives (the token's own probability, a cheaper path) equal those with alternatives", async () => {
        const messages = [{role: "user" as const, content: "Tell me a story"}];
        for (const sampling of [{temperature: 0}, {temperature: 1, seed: 5}] as Array<{temperature: number, seed?: number}>) {
            const ask = async (top: number) => (await api.openai.chat.completions.create({model: "m", messages, max_tokens: 12, ...sampling,
                logprobs: true, top_logprobs: top, ignore_eos: true} as OpenAI.ChatCompletionCreateParamsNonStreaming)).choices[0]!.logprobs!.content!;
            const [own, withTop] = [await ask(0), await ask(3)];
            assert.equal(own.length, 12);
            assert.deepEqual(own.map((entry) => entry.token), withTop.map((entry) => entry.token), JSON.stringify(sampling));
            // Within float noise: the second request reuses the first's prompt from the prefix cache, evaluated in other batches.
            for (const [i, entry] of own.entries())
                assert.ok(Math.abs(entry.logprob - withTop[i]!.logprob) < 5e-3, `${JSON.stringify(sampling)} token ${i}: ${entry.logprob} vs ${withTop[i]!.logprob}`);
            assert.ok(own.every((entry) => entry.top_logprobs.length === 0 && entry.logprob < 0 && entry.logprob > -100));
        }
    });

    test("logprobs: one entry per generated token, alternatives most likely first, streamed or not, chat and completions", async () => {
        const messages = [{role: "user" as const, content: "Tell me a story"}];
        const chat = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3,
            ignore_eos: true} as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const content = chat.choices[0]!.logprobs?.content ?? [];
        assert.equal(content.length, chat.usage!.completion_tokens);
        for (const entry of content) {
            assert.equal(entry.top_logprobs.length, 3);
            assert.ok(entry.logprob <= 0 && entry.top_logprobs.every((top, i, all) => i === 0 || top.logprob <= all[i - 1]!.logprob), JSON.stringify(entry));
            // Greedy: the token taken is the most likely one.
            assert.equal(entry.token, entry.top_logprobs[0]!.token);
            assert.equal(entry.logprob, entry.top_logprobs[0]!.logprob);
            assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
        }
        // Each token's text as it reads in the output (a SentencePiece piece keeps its leading space).
        assert.equal(content.map((entry) => entry.token).join(""), chat.choices[0]!.message.content);
        // A token forced by logit_bias has probability ~1.
        const forced = await complete({temperature: 1, seed: 2, logit_bias: {300: 100}, logprobs: 2});
        assert.equal(forced.tokens, 12);
        const forcedLogprobs = (await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 4, temperature: 1, seed: 2,
            logit_bias: {300: 100}, logprobs: 2} as OpenAI.CompletionCreateParamsNonStreaming)).choices[0]!.logprobs!;
        assert.equal(forcedLogprobs.tokens!.length, 4);
        assert.ok(forcedLogprobs.token_logprobs!.every((logprob) => logprob > -1e-3), JSON.stringify(forcedLogprobs));
        assert.deepEqual(forcedLogprobs.text_offset, [0, 1, 2, 3].map((i) => i * forcedLogprobs.tokens![0]!.length));
        assert.ok(forcedLogprobs.top_logprobs!.every((top) => Object.keys(top).length <= 2));
        // Streamed: every token's entry arrives, also those whose text was held back for a while.
        const stream = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 24, temperature: 1, seed: 3, logprobs: true,
            stream: true, stream_options: {include_usage: true}, ignore_eos: true} as OpenAI.ChatCompletionCreateParamsStreaming);
        let entries = 0;
        let usage: OpenAI.CompletionUsage | undefined;
        for await (const chunk of stream) {
            entries += chunk.choices[0]?.logprobs?.content?.length ?? 0;
            usage = chunk.usage ?? usage;
        }
        assert.equal(entries, usage?.completion_tokens);
        // Without logprobs, none; top_logprobs alone, or over 20, is refused.
        assert.equal((await api.openai.chat.completions.create({model: "m", messages, max_tokens: 2})).choices[0]!.logprobs, null);
        for (const [fields, message] of [[{top_logprobs: 2}, /only with logprobs: true/], [{logprobs: true, top_logprobs: 21}, /between 0 and 20/]] as const)
            await assert.rejects(api.openai.chat.completions.create({model: "m", messages, max_tokens: 2, ...fields}), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError && error.param === "top_logprobs", String(error));
                assert.match(error.message, message);
                return true;
            });
    });

    test("stop: as many stop strings as coding assistants send (Continue's autocomplete: a dozen and more)", async () => {
        const forced = await complete({temperature: 0, logit_bias: {300: 100}});
        const piece = forced.text.slice(0, forced.text.length / 12);
        const stops = [...Array.from({length: 40}, (_, i) => `<|never-${i}|>`), piece.repeat(3)];
        const stopped = await complete({temperature: 0, logit_bias: {300: 100}, stop: stops});
        // The 41st matches from the start once its third piece is out: nothing before it, generation ends there.
        assert.deepEqual(stopped, {text: "", tokens: 3});
    });

    test("bad values: 400 naming the field; a token outside the vocabulary is refused before the engine", async () => {
        const cases: Array<[Extra, string, RegExp]> = [
            [{top_k: 1.5}, "top_k", /integer/],
            [{min_p: 2}, "min_p", /between 0 and 1/],
            [{presence_penalty: 3}, "presence_penalty", /between -2 and 2/],
            [{frequency_penalty: -2.5}, "frequency_penalty", /between -2 and 2/],
            [{repetition_penalty: 0}, "repetition_penalty", /greater than 0/],
            [{repeat_penalty: 1.1, repetition_penalty: 1.2}, "repeat_penalty", /same setting/],
            [{repeat_last_n: -2}, "repeat_last_n", /between -1/],
            // Texts as keys are llama.cpp's (llamaCppSamplers.test.ts); an empty one is neither a token id nor a text.
            [{logit_bias: {"": 1}}, "logit_bias", /token id \(an integer ≥ 0\) or a text/],
            [{logit_bias: {5: 101}}, "logit_bias", /\[−100, 100\]/],
            [{logit_bias: [1, 2]}, "logit_bias", /\[token id or text, bias\] pair/],
            [{logit_bias: "x"}, "logit_bias", /an object of token ids/],
            [{logit_bias: {999999: 1}}, "logit_bias", /not in the model's vocabulary/],
            [{logprobs: 21}, "logprobs", /between 0 and 20/],
            [{stop: Array.from({length: 65}, (_, i) => `stop${i}`)}, "stop", /at most 64 stop strings/],
            [{logprobs: true}, "logprobs", /integer/]
        ];
        // Past the API, the engine checks again (a token outside the vocabulary would crash llama.cpp's sampler).
        const direct = await api.client.generate({prompt: "Hi", maxTokens: 2, logitBias: [{token: 999_999, bias: 1}]}).done;
        assert.equal(direct.reason, "error");
        assert.equal(direct.errorCode, "invalid_request");
        assert.match(direct.error ?? "", /token 999999 is not in the model's vocabulary/);
        const penalties = await api.client.generate({prompt: "Hi", maxTokens: 2, penalties: {lastTokens: -3}}).done;
        assert.match(penalties.error ?? "", /penalties.lastTokens must be an integer ≥ −1/);
        assert.equal((await api.client.generate({prompt: "Hi", maxTokens: 2, ignoreEos: true}).done).generatedTokens, 2, "the engine still serves");
        for (const [fields, param, message] of cases) {
            await assert.rejects(complete(fields), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(fields)}: ${String(error)}`);
                assert.equal(error.param, param, JSON.stringify(fields));
                assert.match(error.message, message);
                return true;
            });
        }
    });
});
