/**
 * Token ids in answers, on a real engine through the official `openai` client and plain HTTP: vLLM's
 * `return_token_ids` (the prompt's ids as evaluated and the output's, on chat and completions, whole or streamed) and
 * llama.cpp's `return_tokens` / streamed `tokens`. Checked against the server's own `/tokenize` and `/detokenize`
 * and the usage counts, so a wrong or shifted id list fails.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

/** The token-id fields vLLM adds (the SDK does not type them). */
type WithIds = {prompt_token_ids?: number[], token_ids?: number[]};

describe("token ids in answers: vLLM's return_token_ids, llama.cpp's return_tokens", () => {
    const api = apiForSuite({mode: "inProcess"});
    const origin = (): string => api.openai.baseURL.replace(/\/v1$/, "");

    async function post<T>(path: string, body: unknown): Promise<T> {
        const response = await fetch(`${origin()}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
        assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
        return await response.json() as T;
    }
    const tokenize = async (body: unknown): Promise<number[]> => (await post<{tokens: number[]}>("/tokenize", body)).tokens;
    const detokenize = async (tokens: number[]): Promise<string> => (await post<{content: string}>("/detokenize", {tokens})).content;

    test("completions: each choice's prompt ids are /tokenize's, its output ids detokenize to its text and count as usage does", async () => {
        const completion = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 12, temperature: 0,
            ignore_eos: true, n: 2, seed: 3, return_token_ids: true} as OpenAI.CompletionCreateParamsNonStreaming);
        const expectedPrompt = await tokenize({prompt: "Once upon a time"});
        let generated = 0;
        for (const choice of completion.choices as Array<OpenAI.CompletionChoice & WithIds>) {
            assert.deepEqual(choice.prompt_token_ids, expectedPrompt);
            assert.equal(choice.token_ids?.length, 12);
            assert.equal(await detokenize(choice.token_ids!), choice.text);
            generated += choice.token_ids!.length;
        }
        assert.equal(generated, completion.usage?.completion_tokens);
        const plain = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 4});
        assert.equal((plain.choices[0] as WithIds).token_ids, undefined, "only when asked");
        assert.equal((plain.choices[0] as WithIds).prompt_token_ids, undefined);
    });

    test("chat: the answer's prompt ids are the rendered chat prompt's (/tokenize with messages), the choice's its output's", async () => {
        const messages = [{role: "system" as const, content: "Be brief."}, {role: "user" as const, content: "Tell me a story"}];
        const completion = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 10, temperature: 0, ignore_eos: true,
            return_token_ids: true} as OpenAI.ChatCompletionCreateParamsNonStreaming) as OpenAI.ChatCompletion & WithIds;
        assert.deepEqual(completion.prompt_token_ids, await tokenize({messages}));
        assert.equal(completion.prompt_token_ids!.length, completion.usage?.prompt_tokens);
        const choice = completion.choices[0] as OpenAI.ChatCompletion.Choice & WithIds;
        assert.equal(choice.token_ids?.length, 10);
        assert.equal(await detokenize(choice.token_ids!), choice.message.content);
    });

    test("streamed: the prompt ids in the first chunk, every generated id exactly once, in order", async () => {
        const prompt = "Once upon a time";
        const whole = await api.openai.completions.create({model: "m", prompt, max_tokens: 16, temperature: 0, ignore_eos: true,
            return_token_ids: true} as OpenAI.CompletionCreateParamsNonStreaming);
        const wholeIds = (whole.choices[0] as WithIds).token_ids!;
        const completions = await api.openai.completions.create({model: "m", prompt, max_tokens: 16, temperature: 0, ignore_eos: true,
            stream: true, return_token_ids: true} as OpenAI.CompletionCreateParamsStreaming);
        const streamed: number[] = [];
        let promptIds: number[] | undefined;
        for await (const chunk of completions) {
            const choice = chunk.choices[0] as (OpenAI.CompletionChoice & WithIds) | undefined;
            if (choice?.prompt_token_ids !== undefined) {
                assert.equal(promptIds, undefined, "the prompt's ids come once");
                promptIds = choice.prompt_token_ids;
            }
            streamed.push(...choice?.token_ids ?? []);
        }
        assert.deepEqual(promptIds, await tokenize({prompt}));
        assert.deepEqual(streamed, wholeIds, "the same greedy tokens as the whole answer");

        const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 16,
            temperature: 0, ignore_eos: true, stream: true, stream_options: {include_usage: true}, return_token_ids: true} as
            OpenAI.ChatCompletionCreateParamsStreaming);
        const chatIds: number[] = [];
        let chatPromptIds: number[] | undefined;
        let usage: OpenAI.CompletionUsage | undefined;
        for await (const chunk of chat) {
            chatPromptIds ??= (chunk as WithIds).prompt_token_ids;
            chatIds.push(...(chunk.choices[0] as WithIds | undefined)?.token_ids ?? []);
            usage = chunk.usage ?? usage;
        }
        assert.equal(chatPromptIds?.length, usage?.prompt_tokens);
        assert.equal(chatIds.length, usage?.completion_tokens);
    });

    test("llama.cpp's /completion: return_tokens fills a whole answer's tokens; a stream's pieces carry theirs, the last event none", async () => {
        type Answer = {content: string, tokens: number[], tokens_predicted: number, stop: boolean};
        const body = {prompt: "Once upon a time", n_predict: 12, temperature: 0, ignore_eos: true};
        const whole = await post<Answer>("/completion", {...body, return_tokens: true});
        assert.equal(whole.tokens.length, whole.tokens_predicted);
        assert.equal(await detokenize(whole.tokens), whole.content);
        assert.deepEqual((await post<Answer>("/completion", body)).tokens, [], "without return_tokens, as llama-server");
        const response = await fetch(`${origin()}/completion`, {method: "POST", body: JSON.stringify({...body, stream: true})});
        const events = (await response.text()).split("\n\n").filter((part) => part.startsWith("data: "))
            .map((part) => JSON.parse(part.slice("data: ".length)) as Answer);
        assert.deepEqual(events.flatMap((event) => event.tokens), whole.tokens);
        assert.equal(events.at(-1)!.stop, true);
    });
});
