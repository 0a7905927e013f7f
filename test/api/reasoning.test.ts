/**
 * A reasoning model's answers through our endpoint with the official `openai` client, on a real engine: the tiny
 * demo model with the demo `thinking` template (every answer starts inside `<think>`, DeepSeek-R1's style; `<think>`
 * and `</think>` are single tokens). The random model closes its reasoning only by chance, so a small `logit_bias`
 * on `</think>` makes it likely, and the raw text of the same seed (`reasoning_format: "none"`) is the reference
 * each split is checked against.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {buildDemoVocabulary, demoAddedTokens, demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel} from "../../engine/llamaTypes.js";
import {preloadChatWrapper, renderPrompt} from "../../engine/promptRenderer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";
import {openaiRefusalOf as errorOf} from "../helpers/apiErrors.js";

const template = demoChatTemplates.thinking;
const closeToken = buildDemoVocabulary(demoAddedTokens(template)).tokens.indexOf("</think>");
const question: OpenAI.ChatCompletionMessageParam[] = [{role: "user", content: "Why is the sky blue?"}];

/** llama.cpp's server's and vLLM's request fields the `openai` client passes through as they are. */
type ReasoningFields = {reasoning_format?: string, chat_template_kwargs?: Record<string, unknown>};
type Body = OpenAI.ChatCompletionCreateParamsNonStreaming & ReasoningFields;
/** The response's reasoning fields (not in the `openai` client's types). */
type ReasoningMessage = OpenAI.ChatCompletionMessage & {reasoning_content?: string};
type ReasoningUsage = OpenAI.CompletionUsage & {completion_tokens_details?: {reasoning_tokens?: number}};

const thinkingModel = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template});

describe("reasoning models: reasoning_content apart from the answer", () => {
    const api = apiForSuite(async () => ({modelPath: await thinkingModel(), contextSize: 4096}));
    // The same model in this process, to render the prompts the engine should have evaluated.
    let llama: Llama;
    let model: LlamaModel;
    before(async () => {
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        model = await llama.loadModel({modelPath: await thinkingModel()});
        await preloadChatWrapper(model);
    });
    after(async () => {
        await llama.dispose();
    });
    const create = async (body: Partial<Body>): Promise<{message: ReasoningMessage, usage: ReasoningUsage, finish: string}> => {
        const completion = await api.openai.chat.completions.create({model: "m", messages: question, max_tokens: 32, temperature: 1, ...body} as Body);
        const choice = completion.choices[0]!;
        return {message: choice.message as ReasoningMessage, usage: completion.usage as ReasoningUsage, finish: choice.finish_reason};
    };
    /** Seeds whose raw answer closes its reasoning with text on both sides of `</think>`. */
    const closingSeeds = async (): Promise<Array<{seed: number, raw: string}>> => {
        const found: Array<{seed: number, raw: string}> = [];
        for (let seed = 1; seed <= 12 && found.length < 3; seed++) {
            const {message} = await create({seed, logit_bias: {[closeToken]: 3}, reasoning_format: "none"});
            const at = message.content!.indexOf("</think>");
            if (at > 0 && message.content!.slice(at + 8).trim() !== "" && message.content!.slice(0, at).trim() !== "")
                found.push({seed, raw: message.content!});
        }
        assert.ok(found.length > 0, "no seed closed its reasoning");
        return found;
    };

    test("the reasoning and the answer are the raw text split at the closing marker; usage counts the reasoning's tokens", async () => {
        for (const {seed, raw} of await closingSeeds()) {
            const at = raw.indexOf("</think>");
            const {message, usage} = await create({seed, logit_bias: {[closeToken]: 3}});
            assert.equal(message.reasoning_content, raw.slice(0, at).trim(), `seed ${seed}`);
            assert.equal(message.content, raw.slice(at + "</think>".length).trimStart(), `seed ${seed}`);
            const reasoningTokens = usage.completion_tokens_details?.reasoning_tokens ?? -1;
            assert.ok(reasoningTokens >= 2 && reasoningTokens < usage.completion_tokens, JSON.stringify(usage));
        }
    });

    test("streamed: reasoning_content deltas first, in pieces, then content deltas; the same text as the whole answer", async () => {
        const [{seed}] = await closingSeeds();
        const whole = await create({seed, logit_bias: {[closeToken]: 3}});
        const stream = await api.openai.chat.completions.create({model: "m", messages: question, max_tokens: 32, temperature: 1, seed,
            logit_bias: {[closeToken]: 3}, stream: true, stream_options: {include_usage: true}});
        const order: string[] = [];
        let reasoning = "";
        let content = "";
        let usage: ReasoningUsage | undefined;
        for await (const chunk of stream) {
            usage = (chunk.usage ?? usage) as ReasoningUsage | undefined;
            const delta = chunk.choices[0]?.delta as {content?: string | null, reasoning_content?: string} | undefined;
            if (delta?.reasoning_content !== undefined) {
                order.push("r");
                reasoning += delta.reasoning_content;
            }
            if (delta?.content) {
                order.push("c");
                content += delta.content;
            }
        }
        assert.equal(reasoning, whole.message.reasoning_content);
        assert.equal(content, whole.message.content);
        assert.match(order.join(""), /^r{2,}c+$/);
        assert.deepEqual(usage?.completion_tokens_details, whole.usage.completion_tokens_details);
    });

    test("an answer that never closes its reasoning is all reasoning", async () => {
        const raw = await create({seed: 7, max_tokens: 16, reasoning_format: "none"});
        const split = await create({seed: 7, max_tokens: 16});
        assert.equal(split.message.content, "");
        assert.equal(split.message.reasoning_content, raw.message.content!.trim());
        assert.equal(split.usage.completion_tokens_details?.reasoning_tokens, 16);
        assert.equal(split.finish, "length");
    });

    test("enable_thinking false and JSON output answer at once: an empty reasoning closed in the prompt, nothing split", async () => {
        const open = await create({seed: 3, max_tokens: 4});
        const off = await create({seed: 3, max_tokens: 4, chat_template_kwargs: {enable_thinking: false}});
        // The prompt ends with "<think>\n" as the template's generation prompt does, or with "<think>\n\n</think>\n\n".
        assert.equal(open.usage.prompt_tokens, renderPrompt(model, {messages: [{role: "user", content: "Why is the sky blue?"}]}, "open").length);
        assert.equal(off.usage.prompt_tokens, renderPrompt(model, {messages: [{role: "user", content: "Why is the sky blue?"}]}, "closed").length);
        assert.ok(off.usage.prompt_tokens > open.usage.prompt_tokens, JSON.stringify([open.usage, off.usage]));
        assert.equal(off.message.reasoning_content, undefined);
        assert.notEqual(off.message.content, "");
        assert.equal(off.usage.completion_tokens_details, undefined);
        const json = await create({seed: 3, max_tokens: 8, response_format: {type: "json_object"}});
        assert.equal(json.usage.prompt_tokens, off.usage.prompt_tokens);
        assert.equal(json.message.reasoning_content, undefined);
        assert.match(json.message.content!, /^\{/);
    });

    test("an assistant message's reasoning_content (or vLLM's reasoning) is rendered into the prompt", async () => {
        const history = (extra: Record<string, string>): OpenAI.ChatCompletionMessageParam[] => [...question,
            {role: "assistant", content: "Scattering.", ...extra} as OpenAI.ChatCompletionAssistantMessageParam, {role: "user", content: "Sure?"}];
        const without = await create({messages: history({}), max_tokens: 1});
        const withReasoning = await create({messages: history({reasoning_content: "Light scatters off the air."}), max_tokens: 1});
        const vllmName = await create({messages: history({reasoning: "Light scatters off the air."}), max_tokens: 1});
        assert.ok(withReasoning.usage.prompt_tokens > without.usage.prompt_tokens + 10, JSON.stringify([without.usage, withReasoning.usage]));
        assert.equal(vllmName.usage.prompt_tokens, withReasoning.usage.prompt_tokens);
    });

    test("text completions are never split", async () => {
        const completion = await api.openai.completions.create({model: "m", prompt: "<think>\nhmm\n</think>\n\n", max_tokens: 16,
            temperature: 1, seed: 2, logit_bias: {[closeToken]: 6}});
        assert.match(completion.choices[0]!.text, /<\/think>/);
        assert.equal((completion.usage as ReasoningUsage).completion_tokens_details, undefined);
    });

    test("refusals name the field", async () => {
        assert.deepEqual(await errorOf(create({reasoning_format: "deepseek-legacy"})), {status: 400, param: "reasoning_format"});
        assert.deepEqual(await errorOf(create({chat_template_kwargs: {enable_thinking: "no"}})),
            {status: 400, param: "chat_template_kwargs.enable_thinking"});
        assert.deepEqual(await errorOf(create({messages: [...question, {role: "assistant", content: "x", reasoning_content: 5} as never]})),
            {status: 400, param: "messages[1].reasoning_content"});
    });
});

describe("a model without a reasoning segment", () => {
    const api = apiForSuite();
    test("reasoning fields are accepted and change nothing", async () => {
        const body = {model: "m", messages: question, max_tokens: 8, temperature: 1, seed: 4};
        const plain = await api.openai.chat.completions.create(body);
        const asked = await api.openai.chat.completions.create({...body, reasoning_format: "deepseek",
            chat_template_kwargs: {enable_thinking: false}} as Body);
        assert.equal(asked.choices[0]!.message.content, plain.choices[0]!.message.content);
        assert.equal((asked.choices[0]!.message as ReasoningMessage).reasoning_content, undefined);
        assert.deepEqual(asked.usage, plain.usage === undefined ? undefined : {...plain.usage, prompt_tokens_details: asked.usage!.prompt_tokens_details});
    });
});
