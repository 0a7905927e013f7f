/**
 * OpenAI's Responses API on our endpoint, with the official `openai` client's `responses` resource (its stream
 * helper checks the event order as it accumulates the response), on real engines: the plain tiny model, the demo
 * `chatmlTools` template (function calls and their outputs), the demo `thinking` template (reasoning items). Each
 * answer is checked against the chat endpoint's for the same conversation and seed: the same prompt tokens, the
 * same text.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {buildDemoVocabulary, demoAddedTokens, demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";
import {openaiRefusalOf as errorOf} from "../helpers/apiErrors.js";
import {until} from "../helpers/until.js";

const sampling = {temperature: 1, seed: 11} as const;

/**
 * The text of a response's messages. The SDK's stream helper fills in `output_text` only from a
 * `response.completed` event; a response cut by `max_output_tokens` ends with `response.incomplete`.
 */
function messageText(response: OpenAI.Responses.Response): string {
    return response.output.flatMap((item) => item.type === "message" ? item.content : [])
        .map((part) => part.type === "output_text" ? part.text : "").join("");
}

describe("Responses API: text", () => {
    const api = apiForSuite({parallel: 2, contextSize: 2048});

    test("a string input answers like the chat endpoint's user message: same prompt tokens, same text; usage and status", async () => {
        const response = await api.openai.responses.create({model: "m", input: "Once upon a time", max_output_tokens: 12, ...sampling});
        const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Once upon a time"}],
            max_tokens: 12, ...sampling});
        assert.match(response.id, /^resp_[0-9a-f]{32}$/);
        assert.equal(response.object, "response");
        assert.equal(response.status, "incomplete");
        assert.deepEqual(response.incomplete_details, {reason: "max_output_tokens"});
        assert.equal(response.output.length, 1);
        const message = response.output[0]!;
        assert.equal(message.type, "message");
        assert.equal(response.output_text, chat.choices[0]!.message.content);
        assert.equal(response.usage?.input_tokens, chat.usage?.prompt_tokens);
        assert.equal(response.usage?.output_tokens, 12);
        assert.equal(response.usage?.total_tokens, chat.usage!.prompt_tokens + 12);
        assert.equal(response.usage?.output_tokens_details.reasoning_tokens, 0);
        assert.equal(response.max_output_tokens, 12);
        assert.equal(response.temperature, 1);
    });

    test("instructions and message items (text parts, developer role) are the chat endpoint's messages", async () => {
        const response = await api.openai.responses.create({model: "m", instructions: "Answer briefly.", max_output_tokens: 4, ...sampling,
            input: [{role: "developer", content: "Be kind."}, {role: "user", content: [{type: "input_text", text: "Hello"}, {type: "input_text", text: " there"}]},
                {role: "assistant", content: "Hi."}, {type: "message", role: "user", content: "Again"}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 4, ...sampling, messages: [
            {role: "system", content: "Answer briefly."}, {role: "system", content: "Be kind."}, {role: "user", content: "Hello there"},
            {role: "assistant", content: "Hi."}, {role: "user", content: "Again"}]});
        assert.equal(response.usage?.input_tokens, chat.usage?.prompt_tokens);
        assert.equal(response.output_text, chat.choices[0]!.message.content);
        assert.equal(response.instructions, "Answer briefly.");
    });

    test("streamed: the event sequence OpenAI sends, deltas adding up to the final text, numbered in order", async () => {
        const stream = await api.openai.responses.create({model: "m", input: "Tell me a story", max_output_tokens: 16, ...sampling, stream: true});
        const types: string[] = [];
        const numbers: number[] = [];
        let deltas = "";
        let final: OpenAI.Responses.Response | undefined;
        for await (const event of stream) {
            types.push(event.type);
            numbers.push(event.sequence_number);
            if (event.type === "response.output_text.delta")
                deltas += event.delta;
            if (event.type === "response.incomplete" || event.type === "response.completed")
                final = event.response;
        }
        const whole = await api.openai.responses.create({model: "m", input: "Tell me a story", max_output_tokens: 16, ...sampling});
        assert.deepEqual(numbers, types.map((_, index) => index));
        const compact = types.filter((type, index) => type !== types[index - 1]);
        assert.deepEqual(compact, ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
            "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
            "response.incomplete"]);
        assert.ok(types.filter((type) => type === "response.output_text.delta").length > 1);
        assert.equal(deltas, whole.output_text);
        assert.equal(final?.output_text, whole.output_text);
        assert.deepEqual(final?.usage, {...whole.usage!, input_tokens_details: final!.usage!.input_tokens_details});
        // The SDK's own accumulator agrees.
        const helper = api.openai.responses.stream({model: "m", input: "Tell me a story", max_output_tokens: 16, ...sampling});
        assert.equal(messageText(await helper.finalResponse()), whole.output_text);
    });

    test("a client that disconnects mid-stream cancels its request, recorded as abort", async () => {
        let recorded: RequestLifecycle | undefined;
        const stop = api.client.observe({onOutputs: (step) => {
            for (const finished of step.iteration.finished)
                if (finished.reason === "abort")
                    recorded = finished;
        }});
        const stream = await api.openai.responses.create({model: "m", input: "Go on and on", max_output_tokens: 800, stream: true});
        let deltas = 0;
        for await (const event of stream)
            if (event.type === "response.output_text.delta" && ++deltas === 3) {
                stream.controller.abort();
                break;
            }
        await until(() => recorded !== undefined, 2000, "the abort to be recorded");
        stop();
        assert.ok(recorded!.generatedTokens < 800);
    });

    test("what a stateless text server cannot serve is refused, naming the field", async () => {
        const create = (body: Record<string, unknown>): Promise<unknown> =>
            api.openai.responses.create({model: "m", input: "Hi", ...body} as OpenAI.Responses.ResponseCreateParamsNonStreaming);
        assert.deepEqual(await errorOf(create({previous_response_id: "resp_1"})), {status: 400, param: "previous_response_id"});
        assert.deepEqual(await errorOf(create({input: [{role: "user", content: [{type: "input_image", image_url: "http://x/y.png"}]}]})),
            {status: 400, param: "input[0].content[0]"});
        assert.deepEqual(await errorOf(create({input: [{type: "item_reference", id: "x"}]})), {status: 400, param: "input[0].type"});
        assert.deepEqual(await errorOf(create({tools: [{type: "custom", name: "apply_patch"}]})), {status: 400, param: "tools[0].type"});
        assert.deepEqual(await errorOf(create({tools: [{type: "namespace", name: "ns", tools: [{type: "custom", name: "x"}]}]})),
            {status: 400, param: "tools[0].tools[0].type"});
        assert.deepEqual(await errorOf(create({max_output_tokens: 5000})), {status: 400, param: "max_output_tokens"});
        assert.deepEqual(await errorOf(create({text: {format: {type: "json_schema", name: "x", schema: {type: "string", pattern: "a+"}}}})),
            {status: 400, param: "text.format.schema"});
        assert.deepEqual(await errorOf(create({input: []})), {status: 400, param: "input"});
    });
});

describe("Responses API: function calls", () => {
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));
    const tools: OpenAI.Responses.FunctionTool[] = [{type: "function", name: "get_weather", description: "The weather in a city", strict: true,
        parameters: {type: "object", properties: {city: {enum: ["Paris", "Rome"]}}, required: ["city"]}}];
    const question = "What is the weather in Paris?";

    test("tool_choice required: function_call items; their outputs go back as input, rendered as the chat endpoint renders them", async () => {
        const response = await api.openai.responses.create({model: "m", input: question, tools, tool_choice: "required",
            parallel_tool_calls: false, max_output_tokens: 200, ...sampling});
        assert.equal(response.status, "completed");
        const calls = response.output.filter((item) => item.type === "function_call");
        assert.equal(calls.length, 1);
        const call = calls[0]!;
        assert.equal(call.name, "get_weather");
        assert.match(call.call_id, /^call_[0-9a-f]{24}$/);
        assert.ok(["Paris", "Rome"].includes((JSON.parse(call.arguments) as {city: string}).city), call.arguments);

        const followUp = await api.openai.responses.create({model: "m", tools, max_output_tokens: 4, ...sampling, input: [
            {role: "user", content: question}, call, {type: "function_call_output", call_id: call.call_id, output: "21 C, sunny"}]});
        const chat = await api.openai.chat.completions.create({model: "m", max_tokens: 4, ...sampling,
            tools: tools.map(({name, description, parameters}) => ({type: "function" as const, function: {name, description: description!,
                parameters: parameters!}})),
            messages: [{role: "user", content: question},
                {role: "assistant", content: null, tool_calls: [{id: call.call_id, type: "function", function: {name: call.name, arguments: call.arguments}}]},
                {role: "tool", tool_call_id: call.call_id, content: "21 C, sunny"}]});
        assert.equal(followUp.usage?.input_tokens, chat.usage?.prompt_tokens);
        assert.equal(followUp.output_text, chat.choices[0]!.message.content);
    });

    test("streamed: a function call arrives as an output item with its arguments' events", async () => {
        const stream = api.openai.responses.stream({model: "m", input: question, tools, tool_choice: {type: "function", name: "get_weather"},
            max_output_tokens: 200, ...sampling});
        const types: string[] = [];
        stream.on("event", (event) => types.push(event.type));
        const final = await stream.finalResponse();
        const call = final.output.find((item) => item.type === "function_call");
        assert.equal(call?.name, "get_weather");
        assert.ok(types.includes("response.function_call_arguments.delta") && types.includes("response.function_call_arguments.done"), types.join());
        assert.equal(types.at(-1), "response.completed");
    });

    test("as Codex sends them: functions in a namespace are offered (their calls name it), built-in web search is left out", async () => {
        const codexTools = [{type: "web_search", external_web_access: false},
            {type: "namespace", name: "weather_v1", description: "Weather tools", tools}] as unknown as OpenAI.Responses.Tool[];
        const response = await api.openai.responses.create({model: "m", input: question, tools: codexTools, tool_choice: "required",
            parallel_tool_calls: false, max_output_tokens: 200, ...sampling});
        const call = response.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall & {namespace?: string};
        assert.equal(call.name, "get_weather");
        assert.equal(call.namespace, "weather_v1");
        // Without the web search tool, the same prompt: it was not rendered.
        const withoutSearch = await api.openai.responses.create({model: "m", input: question, tools: [codexTools[1]!], tool_choice: "required",
            parallel_tool_calls: false, max_output_tokens: 200, ...sampling});
        assert.equal(withoutSearch.usage?.input_tokens, response.usage?.input_tokens);
    });

    test("a named function that is not among the tools is refused", async () => {
        assert.deepEqual(await errorOf(api.openai.responses.create({model: "m", input: question, tools,
            tool_choice: {type: "function", name: "now"}})), {status: 400, param: "tool_choice"});
    });
});

describe("Responses API: a reasoning model", () => {
    const template = demoChatTemplates.thinking;
    const closeToken = buildDemoVocabulary(demoAddedTokens(template)).tokens.indexOf("</think>");
    const api = apiForSuite(async () => ({contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template})}));

    test("a reasoning item before the message, as the chat endpoint's reasoning_content; streamed as reasoning_text deltas", async () => {
        for (const seed of [1, 2, 3, 4, 5, 6]) {
            const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Why?"}], max_tokens: 32,
                temperature: 1, seed, logit_bias: {[closeToken]: 3}});
            const message = chat.choices[0]!.message as OpenAI.ChatCompletionMessage & {reasoning_content?: string};
            if (message.reasoning_content === undefined || message.content === "")
                continue;
            const body = {model: "m", input: "Why?", max_output_tokens: 32, temperature: 1, seed, logit_bias: {[closeToken]: 3}};
            const response = await api.openai.responses.create(body as never) as OpenAI.Responses.Response;
            assert.deepEqual(response.output.map((item) => item.type), ["reasoning", "message"]);
            const reasoning = response.output[0] as OpenAI.Responses.ResponseReasoningItem;
            assert.equal(reasoning.content?.[0]?.text, message.reasoning_content);
            assert.equal(response.output_text, message.content);
            assert.equal(response.usage?.output_tokens_details.reasoning_tokens,
                (chat.usage as {completion_tokens_details?: {reasoning_tokens: number}}).completion_tokens_details?.reasoning_tokens);

            const stream = api.openai.responses.stream(body as never);
            let reasoningDeltas = "";
            let reasoningDone: OpenAI.Responses.ResponseOutputItem | undefined;
            stream.on("response.reasoning_text.delta", (event) => reasoningDeltas += event.delta);
            stream.on("response.output_item.done", (event) => reasoningDone ??= event.item);
            const final = await stream.finalResponse();
            assert.equal(reasoningDeltas, message.reasoning_content);
            assert.equal(messageText(final), message.content);
            // Closed, complete, when the answer began (the first item done; the message is cut by max_output_tokens).
            assert.equal(reasoningDone?.type, "reasoning");
            assert.equal((reasoningDone as OpenAI.Responses.ResponseReasoningItem).status, "completed");
            return;
        }
        assert.fail("no seed closed its reasoning");
    });

    test("reasoning.effort \"none\" answers without reasoning", async () => {
        const response = await api.openai.responses.create({model: "m", input: "Why?", max_output_tokens: 6, reasoning: {effort: "none"}, ...sampling});
        assert.deepEqual(response.output.map((item) => item.type), ["message"]);
        assert.equal(response.usage?.output_tokens_details.reasoning_tokens, 0);
    });
});
