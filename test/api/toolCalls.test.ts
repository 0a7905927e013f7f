/**
 * Tool calling through our endpoint with the official `openai` client, on real engines: the tiny demo model
 * with a template that offers tools and writes calls as JSON in <tool_call> tags, and with the demo's
 * llama2 template, which has no place for tools (node-llama-cpp then documents them in the system prompt
 * and uses its own call syntax). The random model never chooses to call on its own, so calls come from
 * `tool_choice` "required" / a named function, sampled under the call grammar; "auto" answers in text.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel} from "../../engine/llamaTypes.js";
import {preloadChatWrapper, renderPrompt, toolCallSyntaxFor} from "../../engine/promptRenderer.js";
import type {ChatMessage, ToolDefinition} from "../../protocol/engineMessages.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";
import {toolTemplates} from "../helpers/toolTemplates.js";
import {openaiErrorOf as errorOf} from "../helpers/apiErrors.js";

const weather = {type: "function", function: {name: "get_weather", description: "The weather in a city",
    parameters: {type: "object", properties: {city: {enum: ["Paris", "Rome"]}, days: {type: "integer"}, metric: {type: "boolean"}}}}} as const;
const now = {type: "function", function: {name: "now", description: "The time"}} as const;
const tools: OpenAI.ChatCompletionTool[] = [weather, now];
const question: OpenAI.ChatCompletionMessageParam[] = [{role: "user", content: "What is the weather in Paris?"}];

/** A call to one of `tools` whose arguments fit its parameters. */
function assertValidCall(call: OpenAI.ChatCompletionMessageToolCall): void {
    assert.match(call.id, /^call_[0-9a-f]{24}$/);
    assert.equal(call.type, "function");
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    if (call.function.name === "now")
        return assert.deepEqual(args, {});
    assert.equal(call.function.name, "get_weather");
    const {city, days, metric} = args;
    assert.ok(city === "Paris" || city === "Rome", call.function.arguments);
    assert.equal(typeof days, "number", call.function.arguments);
    assert.equal(typeof metric, "boolean", call.function.arguments);
}

function templatedModel(template: string): Promise<string> {
    return ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template});
}

for (const [templateName, template] of Object.entries(toolTemplates)) {
    describe(`tool calls, ${templateName} template`, () => {
        const api = apiForSuite(async () => ({modelPath: await templatedModel(template), contextSize: 4096}));

        test("tool_choice \"required\": calls whose arguments fit the schema, content null, finish_reason tool_calls", async () => {
            for (const seed of [1, 2, 3]) {
                const completion = await api.openai.chat.completions.create({model: "m", messages: question, tools, tool_choice: "required",
                    parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed});
                const choice = completion.choices[0]!;
                assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
                assert.equal(choice.message.content, null);
                assert.equal(choice.message.tool_calls?.length, 1);
                assertValidCall(choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageToolCall);
            }
            // Parallel calls (the default): the grammar lets the model go on calling until it ends or runs out of tokens;
            // a call cut short by max_tokens is returned as text, not lost.
            const parallel = await api.openai.chat.completions.create({model: "m", messages: question, tools, tool_choice: "required",
                max_tokens: 200, temperature: 1, seed: 5});
            const choice = parallel.choices[0]!;
            assert.equal(choice.finish_reason, "tool_calls");
            assert.ok(choice.message.tool_calls!.length >= 1);
            for (const call of choice.message.tool_calls!)
                assertValidCall(call as OpenAI.ChatCompletionMessageToolCall);
            if (choice.message.content !== null)
                assert.ok(parallel.usage!.completion_tokens === 200 && /^\s*(<tool_call>|\|\|call:)/.test(choice.message.content), choice.message.content);
        });

        test("/tokenize with messages and tools (vLLM's body): the prompt the chat endpoint evaluates with those tools", async () => {
            const origin = api.openai.baseURL.replace(/\/v1$/, "");
            const count = async (body: Record<string, unknown>): Promise<number> => {
                const response = await fetch(`${origin}/tokenize`, {method: "POST", headers: {"content-type": "application/json"},
                    body: JSON.stringify(body)});
                assert.equal(response.status, 200);
                return (await response.json() as {count: number}).count;
            };
            const served = await api.openai.chat.completions.create({model: "m", messages: question, tools, max_tokens: 1});
            const withTools = await count({messages: question, tools});
            assert.equal(withTools, served.usage?.prompt_tokens);
            assert.ok(withTools > await count({messages: question}), "the tools are part of the prompt");
            const continued = [...question, {role: "assistant", content: "Let me"}];
            const continuedServed = await api.openai.chat.completions.create({model: "m", messages: continued as never, max_tokens: 1,
                ...{continue_final_message: true}});
            assert.equal(await count({messages: continued, continue_final_message: true}), continuedServed.usage?.prompt_tokens);
        });

        test("a named function: a call of that function; parallel_tool_calls false: exactly one call, streamed as one tool_calls delta", async () => {
            const named = await api.openai.chat.completions.create({model: "m", messages: question, tools, max_tokens: 300,
                tool_choice: {type: "function", function: {name: "now"}}});
            assert.deepEqual(named.choices[0]!.message.tool_calls!.map((call) => [call.type === "function" && call.function.name,
                call.type === "function" && call.function.arguments]), [["now", "{}"]]);
            const stream = await api.openai.chat.completions.create({model: "m", messages: question, tools, tool_choice: "required",
                parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed: 4, stream: true, stream_options: {include_usage: true}});
            const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
            let content = "";
            let finishReason: string | null = null;
            let usage: OpenAI.CompletionUsage | null | undefined;
            for await (const chunk of stream) {
                usage ??= chunk.usage;
                const choice = chunk.choices[0];
                content += choice?.delta.content ?? "";
                deltas.push(...choice?.delta.tool_calls ?? []);
                finishReason = choice?.finish_reason ?? finishReason;
            }
            assert.equal(content, "");
            assert.equal(finishReason, "tool_calls");
            assert.equal(deltas.length, 1);
            const [delta] = deltas;
            assert.equal(delta!.index, 0);
            assertValidCall({id: delta!.id!, type: "function", function: {name: delta!.function!.name!, arguments: delta!.function!.arguments!}});
            assert.ok(usage !== undefined && usage !== null && usage.completion_tokens > 0);
        });

        test("\"auto\": the model may answer in text, streamed as it comes; \"none\": the tools are not offered", async () => {
            const stream = await api.openai.chat.completions.create({model: "m", messages: question, tools, max_tokens: 24, temperature: 0, stream: true});
            const pieces: string[] = [];
            let finishReason: string | null = null;
            for await (const chunk of stream) {
                assert.equal(chunk.choices[0]?.delta.tool_calls, undefined);
                if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
                finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
            }
            assert.ok(pieces.length > 1, "the text streamed in pieces");
            assert.notEqual(finishReason, "tool_calls");
            const offered = await api.openai.chat.completions.create({model: "m", messages: question, tools, max_tokens: 1});
            const none = await api.openai.chat.completions.create({model: "m", messages: question, tools, tool_choice: "none", max_tokens: 1});
            const without = await api.openai.chat.completions.create({model: "m", messages: question, max_tokens: 1});
            assert.equal(none.usage!.prompt_tokens, without.usage!.prompt_tokens);
            assert.ok(offered.usage!.prompt_tokens > without.usage!.prompt_tokens + 20, "the tools are in the prompt");
        });

        test("refusals name the field: unknown type, duplicate or bad names, a named function not offered, a schema no grammar can enforce", async () => {
            const cases: Array<[Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> & Record<string, unknown>, string, RegExp]> = [
                [{tools: [{type: "retrieval"} as never]}, "tools[0].type", /only "function"/],
                [{tools: [now, now]}, "tools", /given twice/],
                [{tools: [{type: "function", function: {name: "has space"}}]}, "tools[0].function.name", /function name/],
                [{tools, tool_choice: {type: "function", function: {name: "other"}}}, "tool_choice", /not among the tools/],
                [{tool_choice: "required"}, "tool_choice", /no tools/],
                [{tools, tool_choice: "required", ignore_eos: true}, "ignore_eos", /demands a call/],
                [{tools: [{type: "function", function: {name: "f", parameters: {type: "object", properties: {id: {type: "string", pattern: "^a"}}}}}],
                    tool_choice: "required"}, "tools", /parameters of tool f cannot be enforced at \/properties\/id\/pattern/],
                [{function_call: {name: "now"}}, "function_call", /use tools/]
            ];
            for (const [fields, param, message] of cases) {
                const error = await errorOf(api.openai.chat.completions.create({model: "m", messages: question, max_tokens: 4, ...fields}));
                assert.equal(error.status, 400, JSON.stringify(fields));
                assert.equal(error.param, param, `${JSON.stringify(fields)}: ${error.message}`);
                assert.match(error.message, message);
            }
        });

        test("a conversation with calls and results: rendered by the template, results matched to calls by id; a result without a call is refused", async () => {
            const conversation: OpenAI.ChatCompletionMessageParam[] = [
                ...question,
                {role: "assistant", content: null, tool_calls: [
                    {id: "c1", type: "function", function: {name: "get_weather", arguments: "{\"city\":\"Paris\"}"}},
                    {id: "c2", type: "function", function: {name: "now", arguments: "{}"}}]},
                {role: "tool", tool_call_id: "c2", content: "noon"},
                {role: "tool", tool_call_id: "c1", content: "21 C and sunny"}
            ];
            const completion = await api.openai.chat.completions.create({model: "m", messages: conversation, tools, max_tokens: 2});
            assert.equal(completion.choices[0]!.finish_reason, "length");
            const orphan = await errorOf(api.openai.chat.completions.create({model: "m", max_tokens: 2,
                messages: [...question, {role: "tool", tool_call_id: "x", content: "?"}]}));
            assert.equal(orphan.status, 400);
            assert.match(orphan.message, /messages\[1\]: a tool message must answer a tool call/);
            const broken = await errorOf(api.openai.chat.completions.create({model: "m", max_tokens: 2, messages: [...question,
                {role: "assistant", tool_calls: [{id: "c1", type: "function", function: {name: "now", arguments: "{not json"}}]}]}));
            assert.equal(broken.status, 400);
            assert.match(broken.message, /messages\[1\]\.tool_calls\[0\]\.function\.arguments: not JSON/);
        });
    });
}

describe("tool calls: what the engine renders and parses", () => {
    let llama: Llama;
    let model: LlamaModel;
    const api = apiForSuite(async () => ({modelPath: await templatedModel(toolTemplates.chatmlTools), contextSize: 4096}));

    before(async () => {
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        model = await llama.loadModel({modelPath: await templatedModel(toolTemplates.chatmlTools)});
        await preloadChatWrapper(model);
    });
    after(async () => {
        await model.dispose();
        await llama.dispose();
    });

    test("node-llama-cpp reads the call syntax from the template (the syntax test/engine/toolCalls.test.ts parses)", () => {
        assert.deepEqual(toolCallSyntaxFor(model), {prefix: "<tool_call>\n{\"name\": \"", prefixAlternates: [], paramsPrefix: "\", \"arguments\": ",
            suffix: "}\n</tool_call>", sectionPrefix: "", betweenCalls: "", sectionSuffix: "", parallel: true});
    });

    test("tools, calls and results in the prompt as the template writes them; the API's prompt is exactly that", async () => {
        const definitions: ToolDefinition[] = [{name: "get_weather", description: "The weather in a city", parameters: weather.function.parameters}];
        const messages: ChatMessage[] = [{role: "user", content: "Weather in Paris?"},
            {role: "assistant", content: "", toolCalls: [{id: "c1", name: "get_weather", arguments: "{\"city\":\"Paris\"}"}]},
            {role: "tool", content: "21 C", toolCallId: "c1"}];
        const tokens = renderPrompt(model, {messages, tools: definitions});
        const text = model.detokenize(tokens).replaceAll(" \n", "\n");
        assert.ok(text.includes("{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city\", " +
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"enum\": [\"Paris\", \"Rome\"]}"), text);
        assert.ok(text.includes("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), text);
        assert.ok(text.includes("<tool_response>\n21 C\n</tool_response>"), text);
        const completion = await api.openai.chat.completions.create({model: "m", max_tokens: 1, tools: [weather], messages: [
            {role: "user", content: "Weather in Paris?"},
            {role: "assistant", content: null, tool_calls: [{id: "c1", type: "function", function: {name: "get_weather", arguments: "{\"city\":\"Paris\"}"}}]},
            {role: "tool", tool_call_id: "c1", content: "21 C"}]});
        assert.equal(completion.usage!.prompt_tokens, tokens.length);
    });
});
