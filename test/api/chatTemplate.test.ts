/**
 * Chat prompts through the model's own Jinja chat template (node-llama-cpp's support), and the
 * documented fallback for a model without one — checked on the rendered text and on the prompt token
 * counts the API reports.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel} from "../../engine/llamaTypes.js";
import {chatWrapperFor, preloadChatWrapper, renderPrompt} from "../../engine/promptRenderer.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import type {ChatMessage} from "../../protocol/engineMessages.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";

/** A template no built-in wrapper knows, so node-llama-cpp must run the Jinja itself. */
const template = "{% for message in messages %}[{{ message['role'] | upper }}] {{ message['content'] }}\n{% endfor %}" +
    "{% if add_generation_prompt %}[ASSISTANT] {% endif %}";
const messages = [{role: "system", content: "Be brief."}, {role: "user", content: "Hi there"}, {role: "assistant", content: "Hello"},
    {role: "user", content: "Tell a story"}] as const satisfies ChatMessage[];

describe("chat templates", () => {
    let llama: Llama;
    const models: LlamaModel[] = [];
    let templatedPath: string;

    before(async () => {
        templatedPath = await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template});
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        await preloadChatWrapper();
    });
    after(async () => {
        for (const model of models)
            await model.dispose();
        await llama.dispose();
    });

    async function load(modelPath: string): Promise<LlamaModel> {
        const model = await llama.loadModel({modelPath});
        models.push(model);
        return model;
    }

    /** The chat prompt's tokens as the API counts them, and the chat template its `/tokenizer_info` (vLLM's) gives. */
    async function apiPromptTokens(modelPath: string): Promise<{tokens: number, chatTemplate: unknown}> {
        const client = new EngineClient({modelPath, threads: 1, contextSize: 512, parallel: 1, statsIntervalMs: 0, mode: "inProcess"});
        await client.start();
        const server = await ApiServer.listen({engine: {current: () => client}, port: 0});
        try {
            const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
            const completion = await openai.chat.completions.create({model: "m", messages, max_tokens: 2});
            const info = await (await fetch(new URL("/tokenizer_info", server.baseUrl))).json() as {chat_template?: unknown};
            return {tokens: completion.usage!.prompt_tokens, chatTemplate: info.chat_template};
        } finally {
            await server.close();
            await client.stop();
        }
    }

    test("a model with tokenizer.chat_template: messages rendered by its Jinja template; the API counts exactly those tokens", async () => {
        const model = await load(templatedPath);
        const tokens = renderPrompt(model, {messages});
        // node-llama-cpp tokenizes the template's text pieces one by one, and this SentencePiece-style
        // vocabulary adds its dummy-prefix space to each piece, hence " \n" where the template has "\n".
        // BOS first: the template does not write it, the vocabulary asks for it (llama.cpp's server adds it so too).
        assert.equal(tokens[0], model.tokens.bos);
        const text = model.detokenize(tokens.slice(1)).replaceAll(" \n", "\n");
        assert.equal(text, "[SYSTEM] Be brief.\n[USER] Hi there\n[ASSISTANT] Hello\n[USER] Tell a story\n[ASSISTANT] ");
        assert.deepEqual(await apiPromptTokens(templatedPath), {tokens: tokens.length, chatTemplate: template});
    });

    test("a template that writes BOS itself gets it once", async () => {
        const model = await load(await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: `{{ bos_token }}${template}`}));
        const tokens = renderPrompt(model, {messages});
        assert.equal(tokens[0], model.tokens.bos);
        assert.notEqual(tokens[1], model.tokens.bos);
        assert.equal(tokens.filter((token) => token === model.tokens.bos).length, 1);
    });

    test("the chat wrapper is resolved once per model (node-llama-cpp resolves it by rendering sample chats), not per request", async () => {
        const model = await load(templatedPath);
        const other = await load(templatedPath);
        const wrapper = chatWrapperFor(model);
        assert.equal(chatWrapperFor(model), wrapper);
        assert.notEqual(chatWrapperFor(other), wrapper, "each model gets its own");
        assert.deepEqual(renderPrompt(model, {messages}), renderPrompt(other, {messages}));
    });

    test("a model without one: the documented role-prefixed fallback", async () => {
        const plainPath = await tinyModelPath();
        const model = await load(plainPath);
        const tokens = renderPrompt(model, {messages});
        // BOS first, as a text prompt begins for this vocabulary.
        assert.equal(tokens[0], model.tokens.bos);
        assert.equal(model.detokenize(tokens.slice(1)), "system: Be brief.\nuser: Hi there\nassistant: Hello\nuser: Tell a story\nassistant:");
        assert.deepEqual(await apiPromptTokens(plainPath), {tokens: tokens.length, chatTemplate: undefined});
    });
});
