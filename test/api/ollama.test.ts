/**
 * Ollama's native API on our endpoint, with Ollama's official `ollama` JavaScript client, on real engines: discovery as
 * Copilot Chat's Ollama models read it (`/api/version`, `/api/tags`, `/api/show`, `/api/ps`), `/api/chat` and
 * `/api/generate` whole and streamed (NDJSON), each answer checked against the OpenAI endpoint's for the same prompt
 * and sampling (Ollama's defaults made explicit there), the durations against the measured lifecycle, tools in the
 * conversation, reasoning, errors in Ollama's shape, a client that goes away, and the monitoring proxy reading it.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {Ollama, type ChatResponse, type GenerateResponse} from "ollama";
import OpenAI from "openai";
import {demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {MonitoringProxy} from "../../extension/host/proxy/monitoringProxy.js";
import {ProxyStats} from "../../extension/host/proxy/proxyStats.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";
import {until} from "../helpers/until.js";

function ollamaFor(openai: OpenAI): Ollama {
    return new Ollama({host: openai.baseURL.replace(/\/v1$/, "")});
}

/** The status and message of a request the client saw refused (ollama-js throws an Error with `status_code`). */
async function refusalOf(request: Promise<unknown>): Promise<{status: number | undefined, message: string}> {
    try {
        await request;
    } catch (error) {
        assert.ok(error instanceof Error, String(error));
        return {status: (error as Error & {status_code?: number}).status_code, message: error.message};
    }
    assert.fail("the request was not refused");
}

/** Ollama's defaults a comparison with the OpenAI endpoint must state there (top_p 0.9, repeat_penalty 1.1 over 64 tokens). */
const ollamaDefaultsForOpenai = {top_p: 0.9, ...{repeat_penalty: 1.1, repeat_last_n: 64}};

describe("Ollama API: chat and generate", () => {
    const api = apiForSuite({parallel: 2, contextSize: 2048});

    test("/api/chat: the OpenAI endpoint's answer for the same conversation and sampling; counts and durations from the lifecycle", async () => {
        let lifecycle: RequestLifecycle | undefined;
        const stop = api.client.observe({onOutputs: (step) => {
            lifecycle ??= step.iteration.finished.find((finished) => finished.client === "ollama-js");
        }});
        const messages = [{role: "system", content: "Be brief."}, {role: "user", content: "Once upon a time"}];
        const answer = await ollamaFor(api.openai).chat({model: "anything", messages, stream: false,
            options: {temperature: 0.7, seed: 5, top_k: 30, num_predict: 12}});
        stop();
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 12, temperature: 0.7, seed: 5, ...{top_k: 30},
            ...ollamaDefaultsForOpenai, messages: messages as OpenAI.ChatCompletionMessageParam[]});
        assert.equal(answer.model, "anything");
        assert.equal(answer.message.role, "assistant");
        assert.equal(answer.message.content, chat.choices[0]!.message.content);
        assert.equal(answer.done, true);
        assert.equal(answer.done_reason, "length");
        assert.equal(answer.prompt_eval_count, chat.usage?.prompt_tokens);
        assert.equal(answer.eval_count, 12);
        assert.ok(!Number.isNaN(Date.parse(String(answer.created_at))));
        // Durations (ns) are the measured lifecycle's.
        assert.ok(lifecycle !== undefined, "the request is in the stats with its client label");
        const ms = (ns: number): number => ns / 1e6;
        assert.ok(Math.abs(ms(answer.total_duration) - (lifecycle.lastDelivered! - lifecycle.arrival)) < 0.01);
        assert.ok(Math.abs(ms(answer.prompt_eval_duration) - (lifecycle.firstToken! - lifecycle.scheduled!)) < 0.01);
        assert.ok(Math.abs(ms(answer.eval_duration) - (lifecycle.lastToken! - lifecycle.firstToken!)) < 0.01);
        assert.ok(answer.prompt_eval_duration > 0 && answer.eval_duration > 0);
        assert.ok(answer.prompt_eval_duration + answer.eval_duration <= answer.total_duration);
        assert.equal(lifecycle.generatedTokens, answer.eval_count);
    });

    test("Ollama's sampling defaults apply: top_p 0.9 and repeat_penalty 1.1, not the engine's", async () => {
        const ollama = ollamaFor(api.openai);
        const messages = [{role: "user", content: "Tell me a story"}];
        const answer = await ollama.chat({model: "m", messages, stream: false, options: {temperature: 0, num_predict: 40}});
        const openaiMessages = messages as OpenAI.ChatCompletionMessageParam[];
        const same = await api.openai.chat.completions.create({model: "m", max_tokens: 40, temperature: 0, ...ollamaDefaultsForOpenai, messages: openaiMessages});
        const unpenalized = await api.openai.chat.completions.create({model: "m", max_tokens: 40, temperature: 0, messages: openaiMessages});
        assert.equal(answer.message.content, same.choices[0]!.message.content);
        assert.notEqual(answer.message.content, unpenalized.choices[0]!.message.content, "the penalty changes this greedy answer");
        const plain = await ollama.chat({model: "m", messages, stream: false, options: {temperature: 0, num_predict: 40, repeat_penalty: 1}});
        assert.equal(plain.message.content, unpenalized.choices[0]!.message.content);
    });

    test("/api/chat streamed: NDJSON pieces that add up to the whole answer, then the counts", async () => {
        const ollama = ollamaFor(api.openai);
        const body = {model: "m", messages: [{role: "user", content: "Tell me a story"}], options: {temperature: 0.9, seed: 11, num_predict: 20}};
        const whole = await ollama.chat({...body, stream: false});
        const parts: ChatResponse[] = [];
        for await (const part of await ollama.chat({...body, stream: true}))
            parts.push(part);
        assert.ok(parts.length > 2, `${parts.length} parts`);
        assert.ok(parts.slice(0, -1).every((part) => !part.done));
        const last = parts.at(-1)!;
        assert.equal(last.done, true);
        assert.equal(last.message.content, "");
        assert.equal(parts.map((part) => part.message.content).join(""), whole.message.content);
        assert.equal(last.eval_count, 20);
        assert.equal(last.prompt_eval_count, whole.prompt_eval_count);
        assert.equal(last.done_reason, "length");
    });

    test("/api/generate: raw, or on a model without a chat template `system` then the prompt, as the completions endpoint takes them", async () => {
        const ollama = ollamaFor(api.openai);
        assert.equal(api.client.info!.model.toolCalling, false, "this model has no chat template");
        const templated = await ollama.generate({model: "m", prompt: "Once upon a time", system: "Be brief.", stream: false,
            options: {temperature: 0, num_predict: 8, repeat_penalty: 1}});
        const bare = await api.openai.completions.create({model: "m", prompt: "Be brief.\n\nOnce upon a time", max_tokens: 8, temperature: 0});
        assert.equal(templated.response, bare.choices[0]!.text);
        assert.equal(templated.prompt_eval_count, bare.usage?.prompt_tokens);
        const raw = await ollama.generate({model: "m", prompt: "Once upon a time", raw: true, stream: false,
            options: {temperature: 0, num_predict: 8, repeat_penalty: 1}});
        const completion = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 8, temperature: 0});
        assert.equal(raw.response, completion.choices[0]!.text);
        assert.equal(raw.prompt_eval_count, completion.usage?.prompt_tokens);
        const parts: GenerateResponse[] = [];
        for await (const part of await ollama.generate({model: "m", prompt: "Once upon a time", raw: true, stream: true,
            options: {temperature: 0, num_predict: 8, repeat_penalty: 1}}))
            parts.push(part);
        assert.equal(parts.map((part) => part.response).join(""), raw.response);
        assert.equal(parts.at(-1)!.eval_count, 8);
    });

    test("an empty prompt or conversation loads the model (done_reason \"load\"), generating nothing", async () => {
        const ollama = ollamaFor(api.openai);
        const generate = await ollama.generate({model: "m", prompt: "", stream: false});
        assert.equal(generate.done_reason, "load");
        assert.equal(generate.response, "");
        const chat = await ollama.chat({model: "m", messages: [], stream: false});
        assert.equal(chat.done_reason, "load");
    });

    test("stop strings, JSON output, log-probabilities", async () => {
        const ollama = ollamaFor(api.openai);
        const reference = await ollama.generate({model: "m", prompt: "Once upon a time", raw: true, stream: false,
            options: {temperature: 0, num_predict: 24}});
        const text = reference.response ?? "";
        const word = text.slice(8, 12);
        assert.ok(word.trim() !== "", JSON.stringify(text));
        const stopped = await ollama.generate({model: "m", prompt: "Once upon a time", raw: true, stream: false,
            options: {temperature: 0, num_predict: 24, stop: [word]}});
        assert.equal(stopped.done_reason, "stop");
        assert.equal(stopped.response, text.slice(0, text.indexOf(word)));

        const json = await ollama.chat({model: "m", messages: [{role: "user", content: "A city?"}], stream: false, options: {seed: 2, num_predict: 120},
            format: {type: "object", properties: {city: {enum: ["Paris", "Rome"]}}, required: ["city"], additionalProperties: false}});
        assert.ok(["Paris", "Rome"].includes((JSON.parse(json.message.content) as {city: string}).city), json.message.content);

        const withLogprobs = await ollama.chat({model: "m", messages: [{role: "user", content: "Hi"}], stream: false, logprobs: true,
            top_logprobs: 3, options: {num_predict: 5, seed: 4}});
        assert.equal(withLogprobs.logprobs?.length, 5);
        assert.equal(withLogprobs.logprobs!.map((entry) => entry.token).join(""), withLogprobs.message.content);
        for (const entry of withLogprobs.logprobs!) {
            assert.ok(entry.logprob <= 0);
            assert.equal(entry.top_logprobs?.length, 3);
        }
    });

    test("errors in Ollama's shape ({\"error\": …}), naming the field; model management is not served", async () => {
        const ollama = ollamaFor(api.openai);
        const images = await refusalOf(ollama.chat({model: "m", messages: [{role: "user", content: "What is this?", images: ["aGk="]}], stream: false}));
        assert.deepEqual(images, {status: 400, message: "messages[0].images: this server's model takes no images"});
        const badOption = await refusalOf(ollama.generate({model: "m", prompt: "x", stream: false, options: {top_k: -1}}));
        assert.equal(badOption.status, 400);
        assert.match(badOption.message, /^options\.top_k: /);
        const tooLong = await refusalOf(ollama.generate({model: "m", prompt: "word ".repeat(3000), raw: true, stream: false}));
        assert.equal(tooLong.status, 400);
        assert.match(tooLong.message, /context/);
        const streamed = await refusalOf((async () => {
            for await (const _ of await ollama.generate({model: "m", prompt: "x", suffix: "y", stream: true}))
                continue;
        })());
        assert.equal(streamed.status, 400, "refused before the stream starts");
        assert.match(streamed.message, /fill-in-the-middle/);
        // Ollama refuses reasoning asked of a model that cannot reason (this one's template has no reasoning segment).
        assert.deepEqual(await refusalOf(ollama.chat({model: "m", messages: [{role: "user", content: "Hi"}], think: true, stream: false})),
            {status: 400, message: "\"m\" does not support thinking"});
        assert.equal((await ollama.chat({model: "m", messages: [{role: "user", content: "Hi"}], think: false, stream: false,
            options: {num_predict: 2}})).done, true, "think: false is no error");
        const pull = await refusalOf(ollama.pull({model: "llama3.2"}));
        assert.equal(pull.status, 501);
        assert.match(pull.message, /runs the one model file/);
        const raw = await fetch(`${ollamaHost(api.openai)}/api/nothing`);
        assert.equal(raw.status, 404);
        assert.deepEqual(Object.keys(await raw.json() as object), ["error"]);
    });

    test("a client that aborts its stream cancels its request, recorded as abort", async () => {
        let recorded: RequestLifecycle | undefined;
        const stop = api.client.observe({onOutputs: (step) => {
            recorded ??= step.iteration.finished.find((finished) => finished.client === "ollama-js" && finished.reason === "abort");
        }});
        const stream = await ollamaFor(api.openai).generate({model: "m", prompt: "Go on", raw: true, stream: true, options: {num_predict: 600}});
        let parts = 0;
        for await (const _ of stream)
            if (++parts === 3) {
                stream.abort();
                break;
            }
        await until(() => recorded !== undefined, 2000, "the abort to be recorded");
        stop();
        assert.ok(recorded!.generatedTokens < 600);
    });

    test("the monitoring proxy in front of it counts exactly what the final line reports", async () => {
        const manager = new StatsManager({tickIntervalMs: 0});
        manager.onEngineState("ready");
        const proxy = await MonitoringProxy.listen({upstream: ollamaHost(api.openai), stats: new ProxyStats(manager)});
        try {
            const parts: ChatResponse[] = [];
            for await (const part of await new Ollama({host: proxy.url}).chat({model: "m", messages: [{role: "user", content: "Hi"}], stream: true,
                options: {num_predict: 9, seed: 1}}))
                parts.push(part);
            const counters = manager.counters();
            assert.equal(counters.requests.completed, 1);
            assert.equal(counters.generationTokens, parts.at(-1)!.eval_count);
            assert.equal(counters.promptTokens, parts.at(-1)!.prompt_eval_count);
        } finally {
            await proxy.close();
        }
    });
});

function ollamaHost(openai: OpenAI): string {
    return openai.baseURL.replace(/\/v1$/, "");
}

describe("Ollama API: discovery, tools and reasoning", () => {
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));

    test("discovery as Copilot Chat's Ollama models do it: version, tags, show (context, capabilities), ps", async () => {
        const ollama = ollamaFor(api.openai);
        const {version} = await ollama.version();
        const [major, minor, patch] = version.split(".").map(Number);
        assert.ok(major! > 0 || minor! > 6 || (minor === 6 && patch! >= 4), `${version} is below Copilot's minimum 0.6.4`);
        const info = api.client.info!;
        const {models} = await ollama.list();
        const modelId = (await api.openai.models.list()).data[0]!.id;
        assert.deepEqual(models.map((model) => [model.name, model.model]), [[`${modelId}:latest`, `${modelId}:latest`]]);
        assert.equal(models[0]!.size, info.model.sizeBytes);
        assert.match(models[0]!.digest, /^[0-9a-f]{64}$/);
        assert.equal(models[0]!.details.family, "llama");
        assert.equal(models[0]!.details.format, "gguf");
        const shown = await ollama.show({model: models[0]!.model});
        const modelInfo = shown.model_info as unknown as Record<string, unknown>;
        const architecture = modelInfo["general.architecture"];
        assert.equal(architecture, "llama");
        assert.equal(modelInfo[`${String(architecture)}.context_length`], info.contextSize);
        assert.equal(typeof modelInfo["general.basename"], "string");
        assert.deepEqual(shown.capabilities, ["completion", "tools"]);
        // The chat then goes in OpenAI's format; the bare address serves it too (llama.cpp's server's routes without /v1).
        const bare = new OpenAI({baseURL: ollamaHost(api.openai), apiKey: "none", maxRetries: 0});
        assert.equal((await bare.models.list()).data[0]!.id, modelId);
        const chat = await bare.chat.completions.create({model: models[0]!.model, messages: [{role: "user", content: "Hi"}], max_tokens: 3});
        assert.equal(chat.usage?.completion_tokens, 3);
        const running = await ollama.ps();
        assert.equal(running.models.length, 1);
        assert.equal((running.models[0] as unknown as {context_length: number}).context_length, info.contextSize);
    });

    test("/api/generate renders the prompt as a user turn after `system` with the model's chat template", async () => {
        const templated = await ollamaFor(api.openai).generate({model: "m", prompt: "Once upon a time", system: "Be brief.", stream: false,
            options: {temperature: 0, num_predict: 8, repeat_penalty: 1}});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 8, temperature: 0, messages: [
            {role: "system", content: "Be brief."}, {role: "user", content: "Once upon a time"}]});
        assert.equal(templated.response, chat.choices[0]!.message.content);
        assert.equal(templated.prompt_eval_count, chat.usage?.prompt_tokens);
    });

    test("tools and an assistant's tool calls (arguments as objects) render as the chat endpoint renders them", async () => {
        const tools = [{type: "function", function: {name: "get_weather", description: "The weather in a city",
            parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"]}}}];
        const answer = await ollamaFor(api.openai).chat({model: "m", stream: false, tools, options: {temperature: 0, num_predict: 6, repeat_penalty: 1},
            messages: [{role: "user", content: "Weather in Paris?"},
                {role: "assistant", content: "", tool_calls: [{function: {name: "get_weather", arguments: {city: "Paris"}}}]},
                {role: "tool", content: "21 C, sunny", tool_name: "get_weather"}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 6, temperature: 0,
            tools: tools as OpenAI.ChatCompletionTool[], messages: [{role: "user", content: "Weather in Paris?"},
                {role: "assistant", content: "", tool_calls: [{id: "call_0", type: "function", function: {name: "get_weather", arguments: "{\"city\":\"Paris\"}"}}]},
                {role: "tool", tool_call_id: "call_0", content: "21 C, sunny"}]});
        assert.equal(answer.prompt_eval_count, chat.usage?.prompt_tokens);
        assert.equal(answer.message.content, chat.choices[0]!.message.content);
    });

    test("a final assistant message is continued (prefill), as the chat endpoint's continue_final_message", async () => {
        const messages = [{role: "user" as const, content: "Tell me a story"}, {role: "assistant" as const, content: "Once upon a time, there"}];
        const answer = await ollamaFor(api.openai).chat({model: "m", stream: false, messages, options: {temperature: 0, num_predict: 6, repeat_penalty: 1}});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 6, temperature: 0, messages, ...{continue_final_message: true}});
        assert.equal(answer.prompt_eval_count, chat.usage?.prompt_tokens);
        assert.equal(answer.message.content, chat.choices[0]!.message.content);
    });
});

describe("Ollama API: a reasoning model", () => {
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.thinking})}));

    test("`thinking` apart from the content, as the chat endpoint's reasoning_content; think: false answers at once", async () => {
        const ollama = ollamaFor(api.openai);
        assert.ok((await ollama.show({model: "m"})).capabilities.includes("thinking"));
        const sampling = {temperature: 1, seed: 3, top_k: 40};
        const messages = [{role: "user", content: "Why?"}];
        const answer = await ollama.chat({model: "m", messages, stream: false, options: {...sampling, top_p: 0.95, repeat_penalty: 1, num_predict: 16}});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 16, ...sampling, top_p: 0.95,
            messages: messages as OpenAI.ChatCompletionMessageParam[]});
        const reference = chat.choices[0]!.message as OpenAI.ChatCompletionMessage & {reasoning_content?: string};
        assert.equal(answer.message.thinking ?? "", reference.reasoning_content ?? "");
        assert.equal(answer.message.content, reference.content ?? "");
        assert.ok((answer.message.thinking ?? "") !== "", "this random model starts reasoning");
        let streamedThinking = "";
        for await (const part of await ollama.chat({model: "m", messages, stream: true, options: {...sampling, top_p: 0.95, repeat_penalty: 1, num_predict: 16}}))
            streamedThinking += part.message.thinking ?? "";
        assert.equal(streamedThinking, answer.message.thinking);
        const direct = await ollama.chat({model: "m", messages, stream: false, think: false, options: {temperature: 0, num_predict: 6}});
        assert.equal(direct.message.thinking, undefined);
        assert.notEqual(direct.message.content, "");
    });
});
