/**
 * Anthropic's Messages API on our endpoint, with the official `@anthropic-ai/sdk` client (its stream helper checks
 * the event order as it accumulates the message), on real engines: the plain tiny model, the demo `chatmlTools`
 * template (tool use and results), the demo `thinking` template (thinking blocks). Each answer is checked against
 * the OpenAI chat endpoint's for the same conversation, greedy: the same prompt tokens, the same text.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import {buildDemoVocabulary, demoAddedTokens, demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";

function anthropicFor(openai: OpenAI, apiKey = "not-needed"): Anthropic {
    return new Anthropic({baseURL: openai.baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0});
}

async function errorOf(request: Promise<unknown>): Promise<{status: number, type: string | undefined, message: string}> {
    try {
        await request;
    } catch (error) {
        if (error instanceof Anthropic.APIError) {
            const body = error.error as {type?: string, error?: {type?: string, message?: string}} | undefined;
            assert.equal(body?.type, "error", JSON.stringify(body));
            return {status: Number(error.status ?? 0), type: body?.error?.type, message: body?.error?.message ?? ""};
        }
        throw error;
    }
    assert.fail("the request was not refused");
}

/** Greedy, so the two APIs' answers to the same conversation can be compared. */
const greedy = {temperature: 0} as const;

/**
 * The SDK's types no longer list the sampling fields (`temperature`, `top_k`) Anthropic's API had; this server
 * still takes them, and the comparisons need them.
 */
function create(anthropic: Anthropic, body: Record<string, unknown>): Promise<Anthropic.Message> {
    return anthropic.messages.create(body as never) as Promise<Anthropic.Message>;
}

/** The SDK's stream helper: it checks the events' order as it accumulates the message. */
function streamOf(anthropic: Anthropic, body: Record<string, unknown>): {finalMessage(): Promise<Anthropic.Message>} {
    return anthropic.messages.stream(body as never);
}

describe("Anthropic Messages API: text", () => {
    const api = apiForSuite({parallel: 2, contextSize: 2048});

    test("an answer like the chat endpoint's: same prompt tokens, same text; stop reason and usage", async () => {
        const anthropic = anthropicFor(api.openai);
        const message = await create(anthropic, {model: "local", max_tokens: 12, system: "Be brief.", ...greedy,
            messages: [{role: "user", content: "Once upon a time"}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 12, ...greedy,
            messages: [{role: "system", content: "Be brief."}, {role: "user", content: "Once upon a time"}]});
        assert.match(message.id, /^msg_[0-9a-f]{32}$/);
        assert.equal(message.type, "message");
        assert.equal(message.role, "assistant");
        assert.equal(message.model, "local");
        assert.deepEqual(message.content, [{type: "text", text: chat.choices[0]!.message.content}]);
        assert.equal(message.stop_reason, "max_tokens");
        assert.equal(message.stop_sequence, null);
        assert.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), chat.usage?.prompt_tokens);
        assert.equal(message.usage.output_tokens, 12);
    });

    test("system and content as text blocks, a multi-turn conversation: the same prompt as the chat endpoint's", async () => {
        const anthropic = anthropicFor(api.openai);
        const message = await create(anthropic, {model: "local", max_tokens: 4, ...greedy,
            system: [{type: "text", text: "Be "}, {type: "text", text: "kind."}],
            messages: [{role: "user", content: [{type: "text", text: "Hello"}]}, {role: "assistant", content: "Hi."},
                {role: "user", content: "Again"}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 4, ...greedy, messages: [
            {role: "system", content: "Be kind."}, {role: "user", content: "Hello"}, {role: "assistant", content: "Hi."},
            {role: "user", content: "Again"}]});
        assert.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), chat.usage?.prompt_tokens);
        assert.equal((message.content[0] as Anthropic.TextBlock).text, chat.choices[0]!.message.content);
    });

    test("streamed: Anthropic's event sequence; the SDK's accumulated message equals the whole answer", async () => {
        const anthropic = anthropicFor(api.openai);
        const body = {model: "local", max_tokens: 16, ...greedy, messages: [{role: "user" as const, content: "Tell me a story"}]};
        const whole = await create(anthropic, body);
        const types: string[] = [];
        let deltas = "";
        const events = await anthropic.messages.create({...body, stream: true} as never) as unknown as AsyncIterable<Anthropic.RawMessageStreamEvent>;
        for await (const event of events) {
            types.push(event.type);
            if (event.type === "content_block_delta" && event.delta.type === "text_delta")
                deltas += event.delta.text;
        }
        const compact = types.filter((type, index) => type !== types[index - 1]);
        assert.deepEqual(compact, ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
            "message_stop"]);
        assert.ok(types.filter((type) => type === "content_block_delta").length > 1);
        assert.equal(deltas, (whole.content[0] as Anthropic.TextBlock).text);
        const final = await streamOf(anthropic, body).finalMessage();
        assert.deepEqual(final.content, whole.content);
        assert.equal(final.stop_reason, "max_tokens");
        assert.equal(final.usage.output_tokens, 16);
        assert.equal(final.usage.input_tokens + (final.usage.cache_read_input_tokens ?? 0),
            whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0));
    });

    test("a final assistant message is a prefill the answer continues (vLLM's continue_final_message on the chat endpoint)", async () => {
        const anthropic = anthropicFor(api.openai);
        const conversation = [{role: "user" as const, content: "Tell me a story"}, {role: "assistant" as const, content: "Once upon a time, there"}];
        const prefilled = await create(anthropic, {model: "local", max_tokens: 8, ...greedy, messages: conversation});
        const continued = await api.openai.chat.completions.create({model: "m", max_tokens: 8, ...greedy, messages: conversation,
            ...{continue_final_message: true}});
        const newTurn = await api.openai.chat.completions.create({model: "m", max_tokens: 8, ...greedy, messages: conversation});
        const inputOf = (message: Anthropic.Message): number => message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0);
        assert.equal(inputOf(prefilled), continued.usage?.prompt_tokens);
        assert.equal((prefilled.content[0] as Anthropic.TextBlock).text, continued.choices[0]!.message.content);
        // Without it the template's turn separator comes first.
        assert.ok(newTurn.usage!.prompt_tokens > continued.usage!.prompt_tokens, JSON.stringify([newTurn.usage, continued.usage]));
        assert.equal((await anthropic.messages.countTokens({model: "local", messages: conversation})).input_tokens, inputOf(prefilled));
        await assert.rejects(api.openai.chat.completions.create({model: "m", max_tokens: 2, messages: [conversation[0]!], ...{continue_final_message: true}}),
            (error: unknown) => error instanceof OpenAI.APIError && error.status === 400 && error.param === "continue_final_message");
    });

    test("stop_sequences: the answer ends before the one it met, stop_reason stop_sequence names it", async () => {
        const anthropic = anthropicFor(api.openai);
        const body = {model: "local", max_tokens: 24, ...greedy, messages: [{role: "user" as const, content: "Say something"}]};
        const text = ((await anthropic.messages.create(body)).content[0] as Anthropic.TextBlock).text;
        const stop = text.slice(8, 11);
        const stopped = await create(anthropic, {...body, stop_sequences: ["zzzq", stop]});
        assert.equal(stopped.stop_reason, "stop_sequence");
        assert.equal(stopped.stop_sequence, stop);
        assert.equal((stopped.content[0] as Anthropic.TextBlock).text, text.slice(0, text.indexOf(stop)));
    });

    test("max_tokens beyond the context is lowered to what it leaves (Claude Code asks for 32000)", async () => {
        // Streamed, as Claude Code asks (the SDK refuses a non-streamed request this long).
        const message = await streamOf(anthropicFor(api.openai), {model: "local", max_tokens: 32000, temperature: 1,
            messages: [{role: "user", content: "Go on"}]}).finalMessage();
        assert.equal(message.stop_reason, "max_tokens");
        // A sequence's cells: the whole context (node-llama-cpp gives each sequence the context size).
        assert.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0) + message.usage.output_tokens,
            api.client.info!.contextSize);
    });

    test("x-api-key (Anthropic's clients) or a bearer token, when the server has keys; 401 in Anthropic's shape without", async () => {
        const server = await ApiServer.listen({engine: {current: () => api.client}, port: 0, apiKeys: [{key: "sk-local-1", name: "laptop"}]});
        try {
            const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "sk-local-1", maxRetries: 0});
            const body = {model: "local", max_tokens: 2, messages: [{role: "user", content: "Hi"}]};
            assert.equal((await create(anthropicFor(openai, "sk-local-1"), body)).usage.output_tokens, 2);
            const bearer = new Anthropic({baseURL: server.url.replace(/\/$/, ""), apiKey: null, authToken: "sk-local-1", maxRetries: 0});
            assert.equal((await create(bearer, body)).usage.output_tokens, 2);
            const wrong = await errorOf(create(anthropicFor(openai, "sk-other"), body));
            assert.deepEqual([wrong.status, wrong.type], [401, "authentication_error"]);
        } finally {
            await server.close();
        }
    });

    test("refusals in Anthropic's error shape, naming the field", async () => {
        const anthropic = anthropicFor(api.openai);
        const create = (body: Record<string, unknown>): Promise<unknown> =>
            anthropic.messages.create({model: "local", max_tokens: 8, messages: [{role: "user", content: "Hi"}], ...body} as never);
        const image = await errorOf(create({messages: [{role: "user", content: [{type: "image", source: {type: "url", url: "http://x/y.png"}}]}]}));
        assert.equal(image.status, 400);
        assert.equal(image.type, "invalid_request_error");
        assert.match(image.message, /^messages\[0\]\.content\[0\]\.type: /);
        assert.match((await errorOf(create({max_tokens: undefined}))).message, /^max_tokens: required/);
        assert.match((await errorOf(create({tools: [{type: "bash_20250124", name: "bash"}]}))).message, /^tools\[0\]\.type: /);
        assert.match((await errorOf(create({temperature: 1.5}))).message, /^temperature: /);
    });
});

describe("Anthropic Messages API: tool use", () => {
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));
    const tools: Anthropic.Tool[] = [{name: "get_weather", description: "The weather in a city",
        input_schema: {type: "object", properties: {city: {enum: ["Paris", "Rome"]}}, required: ["city"]}},
    {type: "web_search_20250305", name: "web_search"} as unknown as Anthropic.Tool];
    const question = "What is the weather in Paris?";

    test("tool_choice any: a tool_use block (web search left out); its tool_result goes back as the chat endpoint renders a tool message", async () => {
        const anthropic = anthropicFor(api.openai);
        const message = await create(anthropic, {model: "local", max_tokens: 200, temperature: 1, tools,
            tool_choice: {type: "any", disable_parallel_tool_use: true}, messages: [{role: "user", content: question}]});
        assert.equal(message.stop_reason, "tool_use");
        const uses = message.content.filter((block) => block.type === "tool_use");
        assert.equal(uses.length, 1);
        const use = uses[0]!;
        assert.equal(use.name, "get_weather");
        assert.match(use.id, /^toolu_[0-9a-f]{24}$/);
        assert.ok(["Paris", "Rome"].includes((use.input as {city: string}).city), JSON.stringify(use.input));

        const followUp = await create(anthropic, {model: "local", max_tokens: 4, ...greedy, tools, messages: [
            {role: "user", content: question}, {role: "assistant", content: [use]},
            {role: "user", content: [{type: "tool_result", tool_use_id: use.id, content: "21 C, sunny"}]}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 4, ...greedy,
            tools: [{type: "function", function: {name: "get_weather", description: "The weather in a city",
                parameters: tools[0]!.input_schema as Record<string, unknown>}}],
            messages: [{role: "user", content: question},
                {role: "assistant", content: null, tool_calls: [{id: use.id, type: "function", function: {name: use.name, arguments: JSON.stringify(use.input)}}]},
                {role: "tool", tool_call_id: use.id, content: "21 C, sunny"}]});
        assert.equal(followUp.usage.input_tokens + (followUp.usage.cache_read_input_tokens ?? 0), chat.usage?.prompt_tokens);
        assert.equal((followUp.content[0] as Anthropic.TextBlock).text, chat.choices[0]!.message.content);
    });

    test("count_tokens: the prompt tokens the same request is then served with, tools included", async () => {
        const anthropic = anthropicFor(api.openai);
        const body = {model: "local", system: "Be brief.", tools, messages: [{role: "user" as const, content: question}]};
        const counted = await anthropic.messages.countTokens(body);
        const served = await create(anthropic, {...body, max_tokens: 1});
        assert.equal(counted.input_tokens, served.usage.input_tokens + (served.usage.cache_read_input_tokens ?? 0));
        const withoutTools = await anthropic.messages.countTokens({...body, tools: undefined});
        assert.ok(withoutTools.input_tokens < counted.input_tokens - 20, `${withoutTools.input_tokens} vs ${counted.input_tokens}`);
    });

    test("output_config.format: JSON that fits the schema", async () => {
        const message = await create(anthropicFor(api.openai), {model: "local", max_tokens: 120, temperature: 1, seed: 3,
            messages: [{role: "user", content: question}], output_config: {format: {type: "json_schema", schema: {type: "object",
                properties: {city: {enum: ["Paris", "Rome"]}, warm: {type: "boolean"}}, required: ["city", "warm"], additionalProperties: false}}}});
        assert.equal(message.stop_reason, "end_turn");
        const answer = JSON.parse((message.content[0] as Anthropic.TextBlock).text) as {city: string, warm: boolean};
        assert.ok(["Paris", "Rome"].includes(answer.city) && typeof answer.warm === "boolean", JSON.stringify(answer));
    });

    test("streamed: a tool_use block with its input as input_json_delta; a named tool", async () => {
        const final = await streamOf(anthropicFor(api.openai), {model: "local", max_tokens: 200, temperature: 1, tools,
            tool_choice: {type: "tool", name: "get_weather"}, messages: [{role: "user", content: question}]}).finalMessage();
        const use = final.content.find((block: Anthropic.ContentBlock) => block.type === "tool_use");
        assert.equal(use?.name, "get_weather");
        assert.ok(["Paris", "Rome"].includes((use!.input as {city: string}).city), JSON.stringify(use!.input));
        assert.equal(final.stop_reason, "tool_use");
    });
});

describe("Anthropic Messages API: a reasoning model", () => {
    const template = demoChatTemplates.thinking;
    const closeToken = buildDemoVocabulary(demoAddedTokens(template)).tokens.indexOf("</think>");
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template})}));

    test("a thinking block before the text, as the chat endpoint's reasoning_content; streamed as thinking_delta", async () => {
        const anthropic = anthropicFor(api.openai);
        // A bias on </think> makes closing the reasoning likely; the chat endpoint's answer for the same seed is the reference.
        for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
            const sampling = {temperature: 1, seed, logit_bias: {[closeToken]: 3}};
            const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Why?"}], max_tokens: 32, ...sampling});
            const reference = chat.choices[0]!.message as OpenAI.ChatCompletionMessage & {reasoning_content?: string};
            if (reference.reasoning_content === undefined || reference.content === "")
                continue;
            const body = {model: "local", max_tokens: 32, ...sampling, messages: [{role: "user" as const, content: "Why?"}]};
            const message = await create(anthropic, body);
            assert.deepEqual(message.content.map((block) => block.type), ["thinking", "text"]);
            assert.equal((message.content[0] as Anthropic.ThinkingBlock).thinking, reference.reasoning_content);
            assert.equal((message.content[1] as Anthropic.TextBlock).text, reference.content);
            const final = await streamOf(anthropic, body).finalMessage();
            assert.deepEqual(final.content, message.content);
            return;
        }
        assert.fail("no seed closed the reasoning");
    });

    test("thinking disabled answers without reasoning", async () => {
        const message = await create(anthropicFor(api.openai), {model: "local", max_tokens: 6, ...greedy, thinking: {type: "disabled"},
            messages: [{role: "user", content: "Why?"}]});
        assert.deepEqual(message.content.map((block) => block.type), ["text"]);
    });
});
