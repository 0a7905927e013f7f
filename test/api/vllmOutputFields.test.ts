/**
 * vLLM's fields about the output's text and the prompt's length, through the official `openai` client on a real engine
 * (the tiny model, greedy, so each case knows the tokens it would otherwise get): `bad_words`, `skip_special_tokens:
 * false`, `truncate_prompt_tokens`; and, as in vLLM, the text of the token that ends an answer (the end of text, a stop
 * id) left out unless `include_stop_str_in_output`. Each check fails if its field is ignored.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

type Params = OpenAI.CompletionCreateParamsNonStreaming & Record<string, unknown>;
/** vLLM's fields on a choice (the SDK does not type them). */
type Choice = OpenAI.CompletionChoice & {token_ids?: number[], prompt_token_ids?: number[]};

/** The tiny model's BOS and end-of-sequence tokens (llama's `<s>`, `</s>`). */
const bos = 1;
const eos = 2;
const prompt = "Once upon a time";

describe("vLLM's bad_words, skip_special_tokens, truncate_prompt_tokens", () => {
    const api = apiForSuite({mode: "inProcess"});
    const origin = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    const complete = async (extra: Record<string, unknown>): Promise<{choice: Choice, usage: OpenAI.CompletionUsage}> => {
        const completion = await api.openai.completions.create({model: "m", prompt, max_tokens: 24, temperature: 0,
            return_token_ids: true, ...extra} as Params);
        return {choice: completion.choices[0] as Choice, usage: completion.usage!};
    };
    async function post<T>(path: string, body: unknown): Promise<T> {
        const response = await fetch(`${origin()}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
        assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
        return await response.json() as T;
    }
    /** A text's tokens alone (llama.cpp's /tokenize body: no BOS), or a completion's prompt tokens (vLLM's body). */
    const tokenize = async (body: {content: string} | {prompt: string} | {messages: unknown[]}): Promise<number[]> =>
        (await post<{tokens: number[]}>("/tokenize", body)).tokens;
    const detokenize = async (tokens: number[]): Promise<string> => (await post<{content: string}>("/detokenize", {tokens})).content;

    test("bad_words: a one-token word is never generated, a two-token one's last token not after its first", async () => {
        const greedy = (await complete({ignore_eos: true})).choice.token_ids!;
        // A generated token whose text, as a word, tokenizes to that token alone; first generated at `at`.
        let single: {at: number, word: string} | undefined;
        for (let at = 1; at < greedy.length && single === undefined; at++) {
            if (greedy.slice(0, at).includes(greedy[at]!))
                continue;
            const word = (await detokenize([greedy[at]!])).trim();
            if (/^[A-Za-z]{2,}$/.test(word) && (await tokenize({content: word})).join() === String(greedy[at]))
                single = {at, word};
        }
        assert.ok(single !== undefined, `a one-token word among ${greedy.join(",")}`);
        const banned = (await complete({ignore_eos: true, bad_words: [single.word]})).choice.token_ids!;
        assert.deepEqual(banned.slice(0, single.at), greedy.slice(0, single.at), "the same answer up to the word");
        assert.ok(!banned.includes(greedy[single.at]!), `${single.word} (${greedy[single.at]}) in ${banned.join(",")}`);

        // Two generated tokens whose text (a phrase: vLLM's bad "words" are token sequences) tokenizes to exactly those two.
        let pair: {at: number, word: string} | undefined;
        for (let at = 0; at + 1 < greedy.length && pair === undefined; at++) {
            const word = (await detokenize(greedy.slice(at, at + 2))).trim();
            if ((await tokenize({content: word})).join() === greedy.slice(at, at + 2).join() &&
                !greedy.slice(0, at).some((token, i) => token === greedy[at] && greedy[i + 1] === greedy[at + 1]))
                pair = {at, word};
        }
        assert.ok(pair !== undefined, `two adjacent tokens whose text tokenizes to them among ${greedy.join(",")}`);
        const cut = (await complete({ignore_eos: true, bad_words: [pair.word]})).choice.token_ids!;
        assert.deepEqual(cut.slice(0, pair.at + 1), greedy.slice(0, pair.at + 1), "its first token is still generated");
        assert.notEqual(cut[pair.at + 1], greedy[pair.at + 1], `${pair.word}: its second token is banned after its first`);
        assert.ok(!cut.some((token, i) => token === greedy[pair.at] && cut[i + 1] === greedy[pair.at + 1]));
    });

    test("skip_special_tokens: false outputs special tokens' text; the token that ends the answer only with include_stop_str_in_output",
        async () => {
            const forcedEnd = {logit_bias: {[eos]: 100}};
            const hidden = await complete({...forcedEnd, ignore_eos: true, max_tokens: 3});
            assert.deepEqual(hidden.choice.token_ids, [eos, eos, eos]);
            assert.equal(hidden.choice.text, "", "skipped by default");
            assert.equal((await complete({...forcedEnd, ignore_eos: true, max_tokens: 3, skip_special_tokens: false})).choice.text, "</s></s></s>");
            const ended = await complete({...forcedEnd, skip_special_tokens: false});
            assert.deepEqual(ended.choice.token_ids, [eos]);
            assert.equal(ended.choice.text, "", "the end of text ends the answer and is not part of it");
            assert.equal((await complete({...forcedEnd, skip_special_tokens: false, include_stop_str_in_output: true})).choice.text, "</s>");
            const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 2,
                temperature: 0, ignore_eos: true, skip_special_tokens: false, ...forcedEnd} as OpenAI.ChatCompletionCreateParamsNonStreaming);
            assert.equal(chat.choices[0]!.message.content, "</s></s>", "chat too");
        });

    test("stop_token_ids: the stop token's text is left out unless include_stop_str_in_output", async () => {
        const greedy = (await complete({ignore_eos: true})).choice;
        const ids = greedy.token_ids!;
        const at = ids.findIndex((token, i) => i >= 3 && !ids.slice(0, i).includes(token));
        const before = (await complete({ignore_eos: true, max_tokens: at})).choice.text;
        const through = (await complete({ignore_eos: true, max_tokens: at + 1})).choice.text;
        assert.ok(through.length > before.length, `token ${ids[at]} has text`);
        assert.equal((await complete({ignore_eos: true, stop_token_ids: [ids[at]!]})).choice.text, before);
        assert.equal((await complete({ignore_eos: true, stop_token_ids: [ids[at]!], include_stop_str_in_output: true})).choice.text, through);
    });

    test("truncate_prompt_tokens: only the prompt's last N tokens are evaluated, a rendered prompt's BOS kept among them", async () => {
        const long = "The little dog ran to the park and saw a big red ball under a tree near the old house";
        const full = await tokenize({prompt: long});
        assert.equal(full[0], bos);
        const cut = await complete({prompt: long, truncate_prompt_tokens: 5, max_tokens: 4});
        assert.deepEqual(cut.choice.prompt_token_ids, [bos, ...full.slice(-4)]);
        assert.equal(cut.usage.prompt_tokens, 5);
        const asIds = await complete({prompt: full.slice(1), truncate_prompt_tokens: 3, max_tokens: 4});
        assert.deepEqual(asIds.choice.prompt_token_ids, full.slice(-3), "token ids are cut as given");
        assert.deepEqual((await complete({prompt: long, truncate_prompt_tokens: -1, max_tokens: 4})).choice.prompt_token_ids, full,
            "−1: as many as a sequence holds");

        const messages = [{role: "user" as const, content: long}];
        const rendered = await tokenize({messages});
        const chat = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 2, truncate_prompt_tokens: 7,
            return_token_ids: true} as OpenAI.ChatCompletionCreateParamsNonStreaming) as OpenAI.ChatCompletion & {prompt_token_ids?: number[]};
        assert.deepEqual(chat.prompt_token_ids, rendered[0] === bos ? [bos, ...rendered.slice(-6)] : rendered.slice(-7));
        assert.equal(chat.usage?.prompt_tokens, 7);

        // A prompt longer than a sequence (1024 tokens here) is refused, and served once truncated.
        const huge = `${long} `.repeat(80);
        await assert.rejects(complete({prompt: huge, max_tokens: 4}), (error: unknown) =>
            error instanceof OpenAI.BadRequestError && error.code === "context_length_exceeded");
        const served = await complete({prompt: huge, max_tokens: 4, truncate_prompt_tokens: 100});
        assert.equal(served.usage.prompt_tokens, 100);
        assert.equal(served.usage.completion_tokens, 4);
    });

    test("refused with a 400 naming the field", async () => {
        const cases: Array<[Record<string, unknown>, string, RegExp]> = [
            [{truncate_prompt_tokens: 0}, "truncate_prompt_tokens", /must be ≥ 1/],
            [{truncate_prompt_tokens: -2}, "truncate_prompt_tokens", /between -1/],
            [{truncate_prompt_tokens: 1025}, "truncate_prompt_tokens", /more than this model's context holds per sequence \(1024/],
            [{truncate_prompt_tokens: 2.5}, "truncate_prompt_tokens", /integer/],
            [{bad_words: "dog"}, "bad_words", /array of at most/],
            [{bad_words: [3]}, "bad_words", /strings/],
            [{skip_special_tokens: "no"}, "skip_special_tokens", /boolean/]
        ];
        for (const [extra, param, message] of cases)
            await assert.rejects(api.openai.completions.create({model: "m", prompt, max_tokens: 4, ...extra} as Params), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${String(error)}`);
                assert.equal(error.param, param, JSON.stringify(extra));
                assert.match(error.message, message);
                return true;
            }, JSON.stringify(extra));
        await assert.rejects(api.openai.completions.create({model: "m", prompt, suffix: "x", max_tokens: 4, truncate_prompt_tokens: 3} as Params),
            (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === "truncate_prompt_tokens" && /suffix/.test(error.message));
    });
});
