/**
 * What evaluation harnesses send to `/v1/completions` (lm-evaluation-harness's `local-completions`, scripts that
 * score text): `echo` with `logprobs` (the prompt's tokens scored by the model, the first one null), `max_tokens: 0`
 * (the prompt alone), token-id prompts and batches of prompts, vLLM's `prompt_logprobs` on both endpoints and its chat `echo`, through the
 * official `openai` client on stories260K (a real trained model, so a likely continuation and an unlikely one really differ).
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import type {EngineStep} from "../../extension/host/engineClient/engineStep.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();
const suite = "completions: echo, prompt log-probabilities, token and batch prompts";

/** The completions fields the SDK's types leave out or type narrower than the API takes. */
type Body = Omit<OpenAI.CompletionCreateParamsNonStreaming, "prompt" | "model"> & {prompt: unknown, model?: string};

/** vLLM's prompt_logprobs: per prompt token (the first null) entries keyed by token id. */
type PromptLogprobs = Array<Record<string, {logprob: number, rank: number | null, decoded_token: string}> | null>;

/** OpenAI's legacy logprobs with what echo adds: null for the prompt's first token. */
type EchoLogprobs = {tokens: string[], token_logprobs: Array<number | null>, top_logprobs: Array<Record<string, number> | null>, text_offset: number[]};

describe(suite, {skip: skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    const api = apiForSuite({modelPath: stories.path ?? "", parallel: 2});

    async function complete(body: Body): Promise<OpenAI.Completion> {
        return await api.openai.completions.create({model: "m", ...body} as OpenAI.CompletionCreateParamsNonStreaming);
    }

    const logprobsOf = (choice: OpenAI.CompletionChoice): EchoLogprobs => choice.logprobs as unknown as EchoLogprobs;

    async function tokenize(text: string): Promise<number[]> {
        const response = await fetch(new URL("/tokenize", api.openai.baseURL), {method: "POST", body: JSON.stringify({content: text})});
        return ((await response.json()) as {tokens: number[]}).tokens;
    }

    test("echo scores the prompt: each token's log-probability is the one greedy generation gave it, the first is null", async () => {
        const prompt = "Once upon a time";
        const generated = await complete({prompt, max_tokens: 8, temperature: 0, logprobs: 3});
        const genLogprobs = logprobsOf(generated.choices[0]!);
        const text = prompt + generated.choices[0]!.text;

        const scored = await complete({prompt: text, max_tokens: 0, echo: true, logprobs: 3});
        const choice = scored.choices[0]!;
        assert.equal(choice.text, text, "max_tokens 0: the prompt alone");
        assert.equal(choice.finish_reason, "length");
        assert.equal(scored.usage?.completion_tokens, 0);
        assert.equal(scored.usage?.prompt_tokens, generated.usage!.prompt_tokens + 8, "the prompt and the generated tokens, retokenized alike");
        const echoed = logprobsOf(choice);
        assert.equal(echoed.tokens.length, scored.usage?.prompt_tokens);
        assert.equal(echoed.tokens[0], "<s>", "BOS, as vLLM's echo shows it");
        assert.equal(echoed.token_logprobs[0], null);
        assert.equal(echoed.top_logprobs[0], null);
        assert.equal(echoed.tokens.slice(1).join(""), ` ${text}`, "the tokens spell the prompt");
        // The generated part, scored as prompt: the same tokens, log-probabilities and alternatives (batch vs one-token
        // evaluation differ in float rounding only).
        const tail = generated.usage!.prompt_tokens;
        assert.deepEqual(echoed.tokens.slice(tail), genLogprobs.tokens);
        for (let i = 0; i < 8; i++) {
            const scoredLogprob = echoed.token_logprobs[tail + i]!;
            assert.ok(Math.abs(scoredLogprob - genLogprobs.token_logprobs[i]!) < 1e-3,
                `token ${i} ${JSON.stringify(genLogprobs.tokens[i])}: scored ${scoredLogprob}, generated ${genLogprobs.token_logprobs[i]}`);
            assert.deepEqual(Object.keys(echoed.top_logprobs[tail + i]!), Object.keys(genLogprobs.top_logprobs[i]!));
        }
        // Each prompt token's offset in the text made of the tokens.
        assert.deepEqual(echoed.text_offset, echoed.tokens.map((_, i) => echoed.tokens.slice(0, i).join("").length));
    });

    test("lm-evaluation-harness's loglikelihood flow with its remote tokenizer: a likely continuation is greedy and likelier", async () => {
        const origin = new URL(api.openai.baseURL).origin;
        // check_remote_tokenizer_support: /tokenizer_info with eos_token, /tokenize answering vLLM's body.
        const info = await (await fetch(`${origin}/tokenizer_info`)).json() as Record<string, unknown>;
        assert.equal(info.eos_token, "</s>");
        assert.equal(info.bos_token, "<s>");
        assert.equal(info.add_bos_token, true);
        const encode = async (text: string): Promise<number[]> => {
            const response = await fetch(`${origin}/tokenize`, {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({prompt: text, add_special_tokens: false})});
            return ((await response.json()) as {tokens: number[]}).tokens;
        };
        assert.deepEqual(await encode("</s>"), [2], "eos_token_id = encode(eos_token)[0]: special tokens' text is parsed");
        const context = "Once upon a time, there was a little girl named Lily. She loved to";
        // _encode_pair: the whole text's tokens, split where the context's end.
        const score = async (continuation: string): Promise<{logprob: number, greedy: boolean}> => {
            const whole = await encode(context + continuation);
            const contextLength = (await encode(context)).length;
            const answer = await complete({prompt: [whole], temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true});
            const logprobs = logprobsOf(answer.choices[0]!);
            assert.equal(logprobs.tokens.length, whole.length + 1, "the prompt's tokens as sent, then the generated one");
            // parse_logprobs: token_logprobs[ctxlen:-1], greedy when each is its position's top.
            const tokens = logprobs.token_logprobs.slice(contextLength, -1) as number[];
            const tops = logprobs.top_logprobs.slice(contextLength, -1) as Array<Record<string, number>>;
            assert.equal(tokens.length, whole.length - contextLength);
            return {logprob: tokens.reduce((sum, value) => sum + value, 0),
                greedy: tokens.every((value, i) => value === Math.max(...Object.values(tops[i]!)))};
        };
        // The harness sends the tokens alone (this remote tokenizer adds no BOS): the greedy continuation of those.
        const greedyText = (await complete({prompt: await encode(context), max_tokens: 3, temperature: 0})).choices[0]!.text;
        const likely = await score(greedyText);
        const unlikely = await score(" eat purple thunder");
        assert.ok(likely.greedy, `the greedy continuation ${JSON.stringify(greedyText)} reads as greedy`);
        assert.ok(!unlikely.greedy);
        assert.ok(likely.logprob > unlikely.logprob + 5, `${likely.logprob} vs ${unlikely.logprob}`);
    });

    test("token-id prompts are evaluated as given; a batch of prompts gets n choices each, at index p × n + i, usage summed", async () => {
        const text = "Once upon a time";
        const ids = [1, ...await tokenize(text)];
        const byText = await complete({prompt: text, max_tokens: 6, temperature: 0});
        const byIds = await complete({prompt: ids, max_tokens: 6, temperature: 0});
        assert.equal(byIds.choices[0]!.text, byText.choices[0]!.text);
        assert.equal(byIds.usage?.prompt_tokens, ids.length);
        assert.equal(byText.usage?.prompt_tokens, ids.length, "a text prompt gets BOS, as llama.cpp's server adds it");

        const prompts = ["Once upon a time", "The little dog"];
        const batch = await complete({prompt: [prompts[0], ids, prompts[1]], max_tokens: 5, temperature: 1, seed: 7, n: 2});
        assert.deepEqual(batch.choices.map((choice) => choice.index), [0, 1, 2, 3, 4, 5]);
        const singles = await Promise.all([prompts[0]!, ids, prompts[1]!].flatMap((prompt) => [7, 8].map(async (seed) =>
            (await complete({prompt, max_tokens: 5, temperature: 1, seed})).choices[0]!.text)));
        assert.deepEqual(batch.choices.map((choice) => choice.text), singles);
        const promptTokens = ids.length * 2 + 1 + (await tokenize(prompts[1]!)).length;
        assert.equal(batch.usage?.prompt_tokens, promptTokens, "each prompt counted once");
        assert.equal(batch.usage?.completion_tokens, 6 * 5);

        // Echo of token ids: the model's text for them (special tokens' included, as vLLM decodes them).
        const echoed = await complete({prompt: ids, max_tokens: 2, temperature: 0, echo: true});
        const plain = await complete({prompt: ids, max_tokens: 2, temperature: 0});
        assert.equal(echoed.choices[0]!.text, `<s> ${text}${plain.choices[0]!.text}`);
    });

    test("streamed echo: each choice's first chunk is its prompt with its scores; the rest as without echo", async () => {
        const body = {model: "m", prompt: ["Once upon a time", "One day"], max_tokens: 5, temperature: 0, logprobs: 1, echo: true, n: 1, stream: true as const};
        const whole = await complete({...body, stream: false});
        const texts = ["", ""];
        const firsts: Array<EchoLogprobs | undefined> = [undefined, undefined];
        const tokens: string[][] = [[], []];
        for await (const chunk of await api.openai.completions.create(body as unknown as OpenAI.CompletionCreateParamsStreaming)) {
            const choice = chunk.choices[0];
            if (choice === undefined)
                continue;
            const logprobs = choice.logprobs as unknown as EchoLogprobs | null;
            if (texts[choice.index] === "") {
                assert.equal(choice.text, body.prompt[choice.index], "the first chunk is the prompt");
                firsts[choice.index] = logprobs ?? undefined;
            }
            texts[choice.index] += choice.text;
            tokens[choice.index]!.push(...logprobs?.tokens ?? []);
        }
        assert.deepEqual(texts, whole.choices.map((choice) => choice.text));
        assert.deepEqual(tokens, whole.choices.map((choice) => logprobsOf(choice).tokens));
        for (const [index, first] of firsts.entries()) {
            assert.equal(first?.token_logprobs[0], null);
            assert.deepEqual(first?.token_logprobs, logprobsOf(whole.choices[index]!).token_logprobs.slice(0, first?.tokens.length));
        }
    });

    test("scoring while another request decodes: its prompt goes in chunks beside the decodes, with the same scores", async () => {
        const long = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ".repeat(3);
        const body = {prompt: long, max_tokens: 0, echo: true, logprobs: 2};
        const alone = logprobsOf((await complete(body)).choices[0]!);
        const decoding = complete({prompt: "One day", max_tokens: 300, temperature: 0, ignore_eos: true} as Body);
        await new Promise((resolve) => setTimeout(resolve, 30));
        const beside = logprobsOf((await complete(body)).choices[0]!);
        assert.equal((await decoding).usage?.completion_tokens, 300);
        assert.deepEqual(beside.tokens, alone.tokens);
        assert.ok(alone.tokens.length > 80, String(alone.tokens.length));
        for (let i = 1; i < alone.tokens.length; i++)
            assert.ok(Math.abs(beside.token_logprobs[i]! - alone.token_logprobs[i]!) < 1e-3, `token ${i}: ${beside.token_logprobs[i]} vs ${alone.token_logprobs[i]}`);
    });

    test("a request that only scores is measured as prefill: no first token, its prompt tokens, reason length", async () => {
        const finished: RequestLifecycle[] = [];
        const stop = api.client.observe({onOutputs: (step: EngineStep) => finished.push(...step.iteration.finished)});
        try {
            const scored = await complete({prompt: "Once upon a time there was a cat", max_tokens: 0, echo: true, logprobs: 0});
            const lifecycle = finished.at(-1);
            assert.equal(lifecycle?.reason, "length");
            assert.equal(lifecycle.promptTokens, scored.usage?.prompt_tokens);
            assert.equal(lifecycle.generatedTokens, 0);
            assert.equal(lifecycle.metrics.ttftS, undefined);
            assert.ok(lifecycle.metrics.prefillS !== undefined && lifecycle.metrics.prefillS > 0, JSON.stringify(lifecycle.metrics));
        } finally {
            stop();
        }
    });

    test("vLLM's prompt_logprobs: each prompt token keyed by id with its rank and the top alternatives; the echo's scores", async () => {
        const prompt = "Once upon a time, there was a little girl named Lily. She saw a big cat";
        const ids = [1, ...await tokenize(prompt)];
        const answer = await complete({prompt, max_tokens: 2, temperature: 0, prompt_logprobs: 3} as Body);
        const scores = (answer.choices[0] as unknown as {prompt_logprobs: PromptLogprobs}).prompt_logprobs;
        assert.equal(answer.usage?.prompt_tokens, ids.length);
        assert.equal(scores.length, ids.length, "one entry per prompt token");
        assert.equal(scores[0], null, "the first token has nothing before it");
        const echoed = logprobsOf((await complete({prompt, max_tokens: 0, echo: true, logprobs: 3})).choices[0]!);
        let outsideTop = 0;
        for (let i = 1; i < ids.length; i++) {
            const entries = scores[i]!;
            const own = entries[String(ids[i])];
            assert.ok(own !== undefined, `token ${i}: its own id ${ids[i]} is a key`);
            assert.ok(Number.isInteger(own.rank) && own.rank! >= 1, `token ${i}: rank ${own.rank}`);
            assert.equal(own.decoded_token, echoed.tokens[i], "its text, as the echo shows it");
            assert.ok(Math.abs(own.logprob - echoed.token_logprobs[i]!) < 1e-3, `token ${i}: ${own.logprob} vs echo ${echoed.token_logprobs[i]}`);
            const ranked = Object.values(entries).filter((entry) => entry.rank !== null && entry.rank <= 3).sort((a, b) => a.rank! - b.rank!);
            assert.deepEqual(ranked.map((entry) => entry.rank), [1, 2, 3], `token ${i}: the three most likely`);
            assert.ok(ranked[0]!.logprob >= ranked[1]!.logprob && ranked[1]!.logprob >= ranked[2]!.logprob);
            assert.deepEqual(ranked.map((entry) => entry.logprob), Object.values(echoed.top_logprobs[i]!).sort((a, b) => b - a),
                "the echo's alternatives");
            // The token among the three, or a fourth entry ranked below them, as likely as its rank says.
            assert.equal(Object.keys(entries).length, own.rank! <= 3 ? 3 : 4);
            assert.ok(own.logprob <= ranked[0]!.logprob);
            if (own.rank! > 3) {
                outsideTop++;
                assert.ok(own.logprob <= ranked[2]!.logprob);
            } else
                assert.equal(own, ranked[own.rank! - 1], "its entry is the alternative of its rank");
        }
        assert.ok(outsideTop > 0 && outsideTop < ids.length - 1, `some prompt tokens outside the model's top 3 (${outsideTop}), not all`);

        // Chat: once, for the rendered prompt, beside the choices; 0: each token alone.
        const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Tell me a story"}], max_tokens: 2,
            temperature: 0, n: 2, prompt_logprobs: 0} as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const chatScores = (chat as unknown as {prompt_logprobs: PromptLogprobs}).prompt_logprobs;
        assert.equal(chatScores.length, chat.usage?.prompt_tokens);
        assert.equal(chatScores[0], null);
        assert.ok(chatScores.slice(1).every((entries) => Object.keys(entries!).length === 1));
        // With an echo's log-probabilities: each with the alternatives it asked for.
        const both = await complete({prompt, max_tokens: 0, echo: true, logprobs: 1, prompt_logprobs: 4} as Body);
        assert.ok(logprobsOf(both.choices[0]!).top_logprobs.slice(1).every((top) => Object.keys(top!).length === 1));
        assert.ok((both.choices[0] as unknown as {prompt_logprobs: PromptLogprobs}).prompt_logprobs.slice(1)
            .every((entries) => Object.keys(entries!).length >= 4));
        const plain = await complete({prompt, max_tokens: 1});
        assert.equal("prompt_logprobs" in plain.choices[0]!, false, "not asked for, not there");
        // A batch: each choice has its own prompt's, token-id prompts keyed by the ids sent.
        const sent = [1, ...await tokenize("The little dog")];
        const batch = await complete({prompt: ["Once upon a time", sent], max_tokens: 1, n: 2, prompt_logprobs: 1} as Body);
        const batchScores = batch.choices.map((choice) => (choice as unknown as {prompt_logprobs: PromptLogprobs}).prompt_logprobs);
        assert.deepEqual(batchScores.map((entries) => entries.length), [5, 5, sent.length, sent.length]);
        assert.deepEqual(batchScores[0], batchScores[1], "both choices of a prompt score it alike");
        assert.deepEqual(sent.slice(1).map((id, i) => String(id) in batchScores[2]![i + 1]!), sent.slice(1).map(() => true));
    });

    test("chat echo (vLLM's): the content begins with the final assistant message, whole and streamed; not another role's", async () => {
        type ChatBody = OpenAI.ChatCompletionCreateParamsNonStreaming & {echo?: boolean, continue_final_message?: boolean};
        const chat = (body: Omit<ChatBody, "model">): Promise<OpenAI.ChatCompletion> =>
            api.openai.chat.completions.create({model: "m", ...body} as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const messages: OpenAI.ChatCompletionMessageParam[] = [{role: "user", content: "Tell me a story"},
            {role: "assistant", content: "Once upon a time, there was"}];
        const body = {messages, max_tokens: 6, temperature: 0, continue_final_message: true, n: 2};
        const plain = await chat(body);
        const echoed = await chat({...body, echo: true});
        for (const [index, choice] of echoed.choices.entries())
            assert.equal(choice.message.content, `Once upon a time, there was${plain.choices[index]!.message.content}`);
        assert.deepEqual([echoed.usage?.prompt_tokens, echoed.usage?.completion_tokens], [plain.usage?.prompt_tokens, plain.usage?.completion_tokens],
            "the echo is not generated: the same token counts");

        const contents: string[][] = [[], []];
        for await (const chunk of await api.openai.chat.completions.create({model: "m", ...body, echo: true, stream: true} as
            OpenAI.ChatCompletionCreateParamsStreaming)) {
            const choice = chunk.choices[0];
            if (choice?.delta.content !== undefined && choice.delta.content !== null && choice.delta.content !== "")
                contents[choice.index]!.push(choice.delta.content);
        }
        assert.deepEqual(contents.map((pieces) => pieces[0]), ["Once upon a time, there was", "Once upon a time, there was"],
            "each choice's first content delta is the echo");
        assert.deepEqual(contents.map((pieces) => pieces.join("")), echoed.choices.map((choice) => choice.message.content));

        const userLast = await chat({messages: [messages[0]!], max_tokens: 4, temperature: 0, echo: true});
        assert.equal(userLast.choices[0]!.message.content, (await chat({messages: [messages[0]!], max_tokens: 4, temperature: 0}))
            .choices[0]!.message.content, "a final user message is not echoed (the answer is the assistant's)");
    });

    test("prompt_logprobs as vLLM refuses it: with a stream (but 0), −1 (the whole vocabulary), over 20, not an integer", async () => {
        // A stream that goes ahead must not carry them.
        const status = async (body: Record<string, unknown>, path = "completions"): Promise<{status: number, param?: string, message?: string}> => {
            const response = await fetch(new URL(`${api.openai.baseURL}/${path}`), {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({model: "m", max_tokens: 1, ...path === "completions" ? {prompt: "Once"} : {messages: [{role: "user", content: "Hi"}]},
                    ...body})});
            if (response.status === 200) {
                assert.doesNotMatch(await response.text(), /prompt_logprobs/);
                return {status: 200};
            }
            const json = await response.json() as {error: {param?: string, message?: string}};
            return {status: response.status, param: json.error.param, message: json.error.message};
        };
        for (const path of ["completions", "chat/completions"]) {
            const streamed = await status({prompt_logprobs: 1, stream: true}, path);
            assert.deepEqual([streamed.status, streamed.param], [400, "prompt_logprobs"], path);
            assert.match(streamed.message!, /not available when `stream=True`/);
            assert.equal((await status({prompt_logprobs: 0, stream: true}, path)).status, 200, `${path}: 0 streams (and reports nothing)`);
            for (const value of [-1, 21, 2.5, "3"]) {
                const refused = await status({prompt_logprobs: value}, path);
                assert.deepEqual([refused.status, refused.param], [400, "prompt_logprobs"], `${path} ${JSON.stringify(value)}`);
            }
        }
    });

    test("refusals name their field: max_tokens 0 without echo, ids outside the vocabulary, echo with suffix, too many completions", async () => {
        const refused = async (body: Body, param: string, message: RegExp): Promise<void> => {
            await assert.rejects(complete(body), (error: unknown) => {
                assert.ok(error instanceof OpenAI.APIError, String(error));
                assert.equal(error.status, 400);
                assert.equal(error.param, param);
                assert.match(error.message, message);
                return true;
            });
        };
        await refused({prompt: "Once", max_tokens: 0}, "max_tokens", /only with echo/);
        await refused({prompt: [1, 99_999], max_tokens: 2}, "prompt", /not in the model's vocabulary/);
        await refused({prompt: [[1, 2], [1, 99_999]], max_tokens: 2, echo: true}, "prompt[1]", /not in the model's vocabulary/);
        await refused({prompt: [1, -2], max_tokens: 2}, "prompt[1]", /token id/);
        await refused({prompt: [], max_tokens: 2}, "prompt", /non-empty/);
        await refused({prompt: ["a", {}], max_tokens: 2}, "prompt[1]", /string or an array of token ids/);
        await refused({prompt: "def f(", suffix: "return 1", echo: true, max_tokens: 2}, "echo", /suffix/);
        await refused({prompt: [[1, 2]], suffix: "x", max_tokens: 2}, "suffix", /text prompt/);
        await refused({prompt: Array.from({length: 65}, () => "a"), n: 2, max_tokens: 1}, "prompt", /at most 128 completions/);
    });
});
