/**
 * The endpoint under odd request bodies: seeded random values for every field it reads (wrong types, out of
 * range, empty, huge, nested), sent to both endpoints. Each answer must be a 200 or a 4xx in OpenAI's error
 * shape naming a field — never a 500, a dropped connection or an engine that stops serving.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {buildDemoVocabulary, demoAddedTokens, demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
        state = (state + 0x6d2b79f5) >>> 0;
        let t = state;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

const fieldNames = ["max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n", "stream",
    "stream_options", "presence_penalty", "frequency_penalty", "repetition_penalty", "repeat_penalty", "repeat_last_n", "logit_bias",
    "response_format", "logprobs", "top_logprobs", "ignore_eos", "tool_choice", "suffix", "echo", "model", "user", "tools", "reasoning_format",
    "chat_template_kwargs"];

function oddValue(next: () => number, depth = 0): unknown {
    const pick = Math.floor(next() * 16);
    switch (pick) {
        case 0: return null;
        case 1: return true;
        case 2: return -1;
        case 3: return 0;
        case 4: return 1e308;
        case 5: return Math.floor(next() * 2000) - 1000;
        case 6: return next() * 4 - 2;
        case 7: return "";
        case 8: return "\u0000\uFFFD" + "x".repeat(Math.floor(next() * 50));
        case 9: return {type: ["text", "json_object", "json_schema", "yaml"][Math.floor(next() * 4)],
            json_schema: depth < 3 ? {name: "x", schema: oddSchema(next, depth + 1)} : {}};
        case 10: return Object.fromEntries(Array.from({length: Math.floor(next() * 4)}, () => [String(Math.floor(next() * 2000) - 500), oddValue(next, depth + 1)]));
        case 11: return Array.from({length: Math.floor(next() * 5)}, () => depth < 3 ? oddValue(next, depth + 1) : "s");
        case 12: return {include_usage: oddValue(next, 3)};
        case 13: return Math.floor(next() * 21);
        case 14: return "auto";
        default: return [1, 2, 3];
    }
}

function oddSchema(next: () => number, depth: number): unknown {
    const shapes = [{type: "string"}, {type: "integer", minimum: 1}, {enum: []}, {anyOf: [{type: "null"}]}, {$ref: "#/$defs/x"},
        {type: "object", properties: {a: depth < 3 ? oddSchema(next, depth + 1) : {}}}, {type: "array", items: "no"}, "schema", {}];
    return shapes[Math.floor(next() * shapes.length)];
}

describe("OpenAI-compatible endpoint: odd request bodies", () => {
    const api = apiForSuite({mode: "inProcess"});

    test("200 or a 4xx naming a field for 300 seeded random bodies; the engine keeps serving", async () => {
        const next = random(20261205);
        const statuses = new Map<number, number>();
        for (let i = 0; i < 300; i++) {
            const chat = next() < 0.5;
            const body: Record<string, unknown> = chat ? {messages: [{role: "user", content: "Hi"}]} : {prompt: "Once"};
            for (let k = 0; k < 1 + Math.floor(next() * 4); k++)
                body[fieldNames[Math.floor(next() * fieldNames.length)]!] = oddValue(next);
            // Keep generation short whatever else was drawn: the point is the validation, not the length.
            if (typeof body.max_tokens !== "number" || body.max_tokens > 4 || body.max_tokens < 0)
                body.max_tokens = 3;
            delete body.max_completion_tokens;
            const response = await fetch(`${api.openai.baseURL}/${chat ? "chat/completions" : "completions"}`,
                {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200) {
                const error = (JSON.parse(text) as {error: {message: string, param: string | null}}).error;
                assert.equal(typeof error.message, "string", text);
            }
        }
        assert.ok((statuses.get(200) ?? 0) > 10 && (statuses.get(400) ?? 0) > 10, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        const after = await api.openai.completions.create({model: "m", prompt: "Still there?", max_tokens: 2});
        assert.equal(after.usage?.completion_tokens, 2);
    });
});

/** A tool definition, mostly well-formed (so the engine gets to render and enforce it), sometimes not. */
function oddTool(next: () => number, index: number): unknown {
    const name = next() < 0.9 ? ["get_weather", "now", "f"][index] : ["has space", "", "x".repeat(70), 7, "now"][Math.floor(next() * 5)];
    const parameters = next() < 0.5 ? {type: "object", properties: {a: {type: "integer"}, b: {enum: ["x", "y"]}}}
        : next() < 0.7 ? {type: "object", properties: {a: oddSchema(next, 1), b: oddSchema(next, 2)}} : oddValue(next, 2);
    return next() < 0.9 ? {type: "function", function: {name, description: next() < 0.9 ? "d" : oddValue(next, 3), parameters}} : oddValue(next, 2);
}

/** A conversation, mostly in OpenAI's tool-calling shapes (calls, results, ids that match or not), sometimes not. */
function oddConversation(next: () => number): unknown[] {
    const pick = <T>(good: T[], bad: T[]): T => next() < 0.9 ? good[Math.floor(next() * good.length)]! : bad[Math.floor(next() * bad.length)]!;
    const call = (): unknown => next() < 0.95
        ? {id: pick(["c1", "c2"], [""]), type: "function", function: {name: pick(["get_weather", "now"], ["bad name"]),
            arguments: pick(["{}", "{\"a\": 1}", "[1]"], ["{oops"])}}
        : oddValue(next, 2);
    const messages: unknown[] = [{role: "user", content: "Weather?"}];
    for (let i = 0; i < Math.floor(next() * 4); i++) {
        // Mostly a call followed by its result; now and then something out of order or malformed.
        const kind = next() < 0.7 ? i % 2 : Math.floor(next() * 5);
        if (kind === 0) messages.push({role: "assistant", content: next() < 0.5 ? null : "ok", tool_calls: Array.from({length: 1 + Math.floor(next() * 2)}, call)});
        else if (kind === 1) messages.push({role: "tool", tool_call_id: pick(["c1", "c2"], ["zz"]), content: next() < 0.9 ? "21 C" : oddValue(next, 2)});
        else if (kind === 2) messages.push({role: "function", name: "now", content: "noon"});
        else if (kind === 3) messages.push({role: "assistant", function_call: next() < 0.7 ? {name: "now", arguments: "{}"} : oddValue(next, 2)});
        else messages.push({role: "tool", content: "no id"});
    }
    return messages;
}

describe("OpenAI-compatible endpoint: odd tool-calling bodies", () => {
    const api = apiForSuite(async () => ({mode: "inProcess" as const, contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));

    test("200 or a 4xx for 200 seeded random tool-calling bodies on a model that takes tools; the engine keeps serving", async () => {
        const next = random(20261206);
        const statuses = new Map<number, number>();
        let toolCalls = 0;
        for (let i = 0; i < 200; i++) {
            const body: Record<string, unknown> = {messages: oddConversation(next), max_tokens: 150};
            if (next() < 0.9) body.tools = next() < 0.9 ? Array.from({length: 1 + Math.floor(next() * 3)}, (_, index) => oddTool(next, index)) : oddValue(next);
            if (next() < 0.7) body.tool_choice = next() < 0.8
                ? ["auto", "none", "required", {type: "function", function: {name: "now"}}, {type: "function", function: {name: "get_weather"}}][Math.floor(next() * 5)]
                : oddValue(next);
            if (next() < 0.3) body.parallel_tool_calls = next() < 0.7 ? next() < 0.5 : oddValue(next);
            if (next() < 0.2) body.stream = true;
            const response = await fetch(`${api.openai.baseURL}/chat/completions`,
                {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status === 200) {
                // A stream that started must not end in an error event either.
                assert.ok(!text.includes("\"error\":{"), `an error in a 200 for ${JSON.stringify(body)}: ${text}`);
                toolCalls += text.includes("\"tool_calls\"") ? 1 : 0;
            } else
                assert.equal(typeof (JSON.parse(text) as {error: {message: unknown}}).error.message, "string", text);
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 20, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        assert.ok(toolCalls > 0, `some answers carried tool calls: ${toolCalls}`);
        const after = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Still there?"}], max_tokens: 2});
        assert.equal(after.usage?.completion_tokens, 2);
    });
});

describe("OpenAI-compatible endpoint: odd bodies for a reasoning model", () => {
    const template = demoChatTemplates.thinking;
    const closeToken = buildDemoVocabulary(demoAddedTokens(template)).tokens.indexOf("</think>");
    const api = apiForSuite(async () => ({mode: "inProcess" as const, contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: template})}));

    test("200 or a 4xx for 120 seeded random bodies with reasoning fields; a 200's reasoning ends at its closing marker", async () => {
        const next = random(20261207);
        const one = <T>(values: T[]): T => values[Math.floor(next() * values.length)]!;
        const statuses = new Map<number, number>();
        let split = 0;
        for (let i = 0; i < 120; i++) {
            const messages: unknown[] = [{role: "user", content: "Why?"}];
            if (next() < 0.4)
                messages.push({role: "assistant", content: next() < 0.8 ? "Because." : null,
                    [one(["reasoning_content", "reasoning"])]: next() < 0.8 ? "I looked." : oddValue(next, 2)}, {role: "user", content: "Sure?"});
            const body: Record<string, unknown> = {messages, max_tokens: 1 + Math.floor(next() * 24), temperature: 1, seed: i,
                logit_bias: {[closeToken]: one([0, 2, 4, 8])}};
            if (next() < 0.4) body.reasoning_format = next() < 0.8 ? one(["none", "auto", "deepseek"]) : oddValue(next);
            if (next() < 0.3) body.chat_template_kwargs = next() < 0.8 ? {enable_thinking: next() < 0.5, other: 1} : oddValue(next);
            if (next() < 0.15) body.response_format = {type: "json_object"};
            if (next() < 0.3) body.stream = true;
            const response = await fetch(`${api.openai.baseURL}/chat/completions`,
                {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200) {
                assert.equal(typeof (JSON.parse(text) as {error: {message: unknown}}).error.message, "string", text);
                continue;
            }
            assert.ok(!text.includes("\"error\":{"), `an error in a 200 for ${JSON.stringify(body)}: ${text}`);
            if (body.stream === true)
                continue;
            type Answer = {choices: [{message: {content: string, reasoning_content?: string}}],
                usage: {completion_tokens: number, completion_tokens_details?: {reasoning_tokens: number}}};
            const {choices: [{message}], usage} = JSON.parse(text) as Answer;
            // The reasoning ends at the first closing marker (a second one is the answer's text, as llama.cpp's server splits it).
            if (message.reasoning_content !== undefined) {
                split++;
                assert.ok(!message.reasoning_content.includes("</think>"), text);
            }
            const reasoningTokens = usage.completion_tokens_details?.reasoning_tokens ?? 0;
            assert.ok(reasoningTokens <= usage.completion_tokens, text);
        }
        assert.ok((statuses.get(200) ?? 0) > 40 && (statuses.get(400) ?? 0) > 3, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        assert.ok(split > 10, `split answers: ${split}`);
    });
});

/** An input item of the Responses API, mostly well-formed, sometimes not. */
function oddResponsesItem(next: () => number): unknown {
    const items = [
        {role: "user", content: "Weather?"},
        {type: "message", role: "user", content: [{type: "input_text", text: "Hi"}]},
        {role: "assistant", content: [{type: "output_text", text: "Sure."}]},
        {role: "developer", content: "Be brief."},
        {type: "function_call", call_id: "c1", name: "get_weather", arguments: "{\"a\": 1}"},
        {type: "function_call_output", call_id: "c1", output: "21 C"},
        {type: "reasoning", summary: [], content: [{type: "reasoning_text", text: "Thinking."}]},
        {type: "function_call_output", call_id: "zz", output: [{type: "input_text", text: "x"}]},
        {role: "user", content: [{type: "input_image", image_url: "http://x/y.png"}]},
        {type: "web_search_call"}
    ];
    return next() < 0.9 ? items[Math.floor(next() * items.length)] : oddValue(next, 2);
}

describe("OpenAI-compatible endpoint: odd Responses API bodies", () => {
    const api = apiForSuite(async () => ({mode: "inProcess" as const, contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));
    const fields = ["instructions", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "metadata", "store",
        "previous_response_id", "top_k", "seed", "include", "truncation", "background", "model", "user"];

    test("200 or a 4xx for 150 seeded random bodies; a streamed 200 ends with its final event; the engine keeps serving", async () => {
        const next = random(20261208);
        const statuses = new Map<number, number>();
        for (let i = 0; i < 150; i++) {
            const body: Record<string, unknown> = {input: next() < 0.3 ? "Hi" : Array.from({length: Math.floor(next() * 4)}, () => oddResponsesItem(next)),
                max_output_tokens: 1 + Math.floor(next() * 20)};
            for (let k = 0; k < Math.floor(next() * 3); k++)
                body[fields[Math.floor(next() * fields.length)]!] = oddValue(next);
            if (next() < 0.4) body.tools = [{type: "function", name: "get_weather", parameters: {type: "object", properties: {a: {type: "integer"}}}}];
            if (next() < 0.2) body.tool_choice = next() < 0.5 ? "required" : {type: "function", name: "get_weather"};
            if (next() < 0.3) body.stream = true;
            const response = await fetch(`${api.openai.baseURL}/responses`,
                {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200)
                assert.equal(typeof (JSON.parse(text) as {error: {message: unknown}}).error.message, "string", text);
            else if (body.stream === true)
                assert.match(text, /event: response\.(completed|incomplete)\ndata: .*\n\n$/, `${JSON.stringify(body)}: ${text.slice(-300)}`);
            else
                assert.match((JSON.parse(text) as {status: string}).status, /^(completed|incomplete)$/, text);
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 20, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        const after = await api.openai.responses.create({model: "m", input: "Still there?", max_output_tokens: 2});
        assert.equal(after.usage?.output_tokens, 2);
    });
});

/** A message of Anthropic's Messages API, mostly well-formed (text, tool use and results, thinking), sometimes not. */
function oddAnthropicMessage(next: () => number): unknown {
    const messages = [
        {role: "user", content: "Weather?"},
        {role: "user", content: [{type: "text", text: "Hi"}, {type: "text", text: " there"}]},
        {role: "assistant", content: [{type: "thinking", thinking: "Hm.", signature: ""}, {type: "text", text: "Sure."}]},
        {role: "assistant", content: [{type: "tool_use", id: "toolu_1", name: "get_weather", input: {a: 1}}]},
        {role: "user", content: [{type: "tool_result", tool_use_id: "toolu_1", content: "21 C"}]},
        {role: "user", content: [{type: "tool_result", tool_use_id: "toolu_9", content: [{type: "text", text: "x"}], is_error: true}]},
        {role: "assistant", content: [{type: "redacted_thinking", data: "abc"}, {type: "text", text: "ok"}]}
    ];
    const refused = [{role: "user", content: [{type: "image", source: {type: "url", url: "http://x/y.png"}}]}, {role: "tool", content: "no"}];
    const draw = next();
    return draw < 0.9 ? messages[Math.floor(next() * messages.length)] : draw < 0.95 ? refused[Math.floor(next() * refused.length)] : oddValue(next, 2);
}

describe("Anthropic Messages API: odd bodies", () => {
    const api = apiForSuite(async () => ({mode: "inProcess" as const, contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));
    const fields = ["system", "temperature", "top_p", "top_k", "tool_choice", "thinking", "stop_sequences", "metadata", "output_config", "stream",
        "model", "max_tokens", "seed", "cache_control"];

    test("200 or a 4xx in Anthropic's error shape for 150 seeded random bodies; a streamed 200 ends with message_stop", async () => {
        const next = random(20261209);
        const statuses = new Map<number, number>();
        const base = api.openai.baseURL.replace(/\/v1$/, "");
        for (let i = 0; i < 150; i++) {
            const body: Record<string, unknown> = {model: "local", max_tokens: 1 + Math.floor(next() * 20),
                messages: Array.from({length: 1 + Math.floor(next() * 3)}, () => oddAnthropicMessage(next))};
            if (next() < 0.4)
                body[fields[Math.floor(next() * fields.length)]!] = oddValue(next);
            if (next() < 0.4) body.tools = [{name: "get_weather", input_schema: {type: "object", properties: {a: {type: "integer"}}}},
                ...next() < 0.3 ? [{type: "web_search_20250305", name: "web_search"}] : []];
            if (next() < 0.2) body.tool_choice = next() < 0.5 ? {type: "any"} : {type: "tool", name: "get_weather"};
            if (next() < 0.3) body.stream = true;
            const path = next() < 0.1 ? "/v1/messages/count_tokens" : "/v1/messages";
            const response = await fetch(`${base}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200) {
                const error = JSON.parse(text) as {type: string, error: {type: string, message: unknown}};
                assert.equal(error.type, "error", text);
                assert.equal(typeof error.error.message, "string", text);
            } else if (path.endsWith("count_tokens"))
                assert.ok((JSON.parse(text) as {input_tokens: number}).input_tokens > 0, text);
            else if (body.stream === true)
                assert.match(text, /event: message_stop\ndata: \{"type":"message_stop"\}\n\n$/, `${JSON.stringify(body)}: ${text.slice(-300)}`);
            else
                assert.match((JSON.parse(text) as {stop_reason: string}).stop_reason, /^(end_turn|max_tokens|tool_use|stop_sequence)$/, text);
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 20, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
    });
});

/** A message of Ollama's chat, mostly well-formed (thinking, tool calls with object arguments, tool results), sometimes not. */
function oddOllamaMessage(next: () => number): unknown {
    const messages = [
        {role: "user", content: "Weather?"},
        {role: "system", content: "Be brief."},
        {role: "assistant", content: "Sure.", thinking: "Hm."},
        {role: "assistant", content: "", tool_calls: [{function: {name: "get_weather", arguments: {a: 1}}}]},
        {role: "tool", content: "21 C", tool_name: "get_weather"}
    ];
    const refused = [{role: "user", content: "x", images: ["aGk="]}, {role: "developer", content: "no"},
        {role: "assistant", tool_calls: [{function: {name: "bad name", arguments: "{}"}}]}];
    const draw = next();
    return draw < 0.9 ? messages[Math.floor(next() * messages.length)] : draw < 0.95 ? refused[Math.floor(next() * refused.length)] : oddValue(next, 2);
}

describe("Ollama API: odd bodies", () => {
    const api = apiForSuite(async () => ({mode: "inProcess" as const, contextSize: 4096,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools})}));
    const fields = ["format", "think", "logprobs", "top_logprobs", "stream", "model", "keep_alive", "system", "raw", "suffix", "template", "context",
        "tools", "images"];
    const optionNames = ["temperature", "top_k", "top_p", "min_p", "seed", "num_predict", "stop", "repeat_penalty", "repeat_last_n",
        "presence_penalty", "frequency_penalty", "num_ctx", "mirostat"];

    test("200 or a 4xx in Ollama's error shape for 150 seeded random bodies; a streamed 200 ends with its done line", async () => {
        const next = random(20261205);
        const statuses = new Map<number, number>();
        const base = api.openai.baseURL.replace(/\/v1$/, "");
        for (let i = 0; i < 150; i++) {
            const chat = next() < 0.6;
            const body: Record<string, unknown> = {model: "local", stream: next() < 0.4,
                options: {num_predict: 1 + Math.floor(next() * 12), ...next() < 0.5 ? {[optionNames[Math.floor(next() * optionNames.length)]!]: oddValue(next)} : {}},
                ...chat ? {messages: Array.from({length: 1 + Math.floor(next() * 3)}, () => oddOllamaMessage(next))} : {prompt: next() < 0.9 ? "Once" : oddValue(next)}};
            if (next() < 0.4)
                body[fields[Math.floor(next() * fields.length)]!] = oddValue(next);
            if (chat && next() < 0.3) body.tools = [{type: "function", function: {name: "get_weather", parameters: {type: "object"}}}];
            const response = await fetch(`${base}/api/${chat ? "chat" : "generate"}`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200) {
                const error = JSON.parse(text) as Record<string, unknown>;
                assert.deepEqual(Object.keys(error), ["error"], text);
                assert.equal(typeof error.error, "string", text);
                continue;
            }
            const lines = text.trimEnd().split("\n").map((line) => JSON.parse(line) as {done: boolean, done_reason?: string});
            assert.ok(body.stream === true || lines.length === 1, text);
            assert.ok(lines.slice(0, -1).every((line) => !line.done), text);
            assert.match(lines.at(-1)!.done_reason ?? "", /^(stop|length|load)$/, `${JSON.stringify(body)}: ${text.slice(-300)}`);
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 20, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        const after = await fetch(`${base}/api/generate`, {method: "POST", body: JSON.stringify({model: "m", prompt: "Hi", stream: false, options: {num_predict: 2}})});
        assert.equal((await after.json() as {eval_count: number}).eval_count, 2);
    });
});

describe("embeddings: odd bodies", () => {
    const api = apiForSuite({mode: "inProcess", contextSize: 512});

    test("200 or a 4xx in the route's error shape for 120 seeded random bodies (OpenAI's and Ollama's routes)", async () => {
        const next = random(20261206);
        const statuses = new Map<number, number>();
        const base = api.openai.baseURL.replace(/\/v1$/, "");
        const inputs = (): unknown => {
            const draw = next();
            return draw < 0.3 ? "Once upon a time" : draw < 0.5 ? ["a", "bb", "ccc"] : draw < 0.6 ? [1, 2, 3] : draw < 0.7 ? [[1, 2], [3]]
                : draw < 0.75 ? "word ".repeat(600) : oddValue(next);
        };
        for (let i = 0; i < 120; i++) {
            const path = ["/v1/embeddings", "/api/embed", "/api/embeddings"][Math.floor(next() * 3)]!;
            const body: Record<string, unknown> = path === "/api/embeddings" ? {model: "m", prompt: next() < 0.8 ? "hello" : oddValue(next)}
                : {model: "m", input: inputs()};
            for (const field of ["encoding_format", "dimensions", "truncate", "model", "options", "user"])
                if (next() < 0.15) body[field] = oddValue(next);
            const response = await fetch(`${base}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            const json = JSON.parse(text) as Record<string, unknown>;
            if (response.status !== 200)
                assert.equal(typeof (path === "/v1/embeddings" ? (json.error as {message: unknown}).message : json.error), "string", text);
            else if (path === "/v1/embeddings")
                assert.ok(Array.isArray(json.data) && json.data.length > 0, text.slice(0, 300));
            else
                assert.ok(Array.isArray(path === "/api/embed" ? json.embeddings : json.embedding), text.slice(0, 300));
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 10, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
    });
});

describe("llama.cpp's /completion and /infill: odd bodies", () => {
    const api = apiForSuite(async () => ({mode: "inProcess" as const,
        modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: true})}));
    const fields = ["n_predict", "temperature", "top_k", "top_p", "min_p", "seed", "stop", "stream", "ignore_eos", "repeat_penalty",
        "repeat_last_n", "presence_penalty", "frequency_penalty", "logit_bias", "json_schema", "n_indent", "t_max_predict_ms", "n_probs",
        "grammar", "cache_prompt", "samplers", "input_extra", "prompt"];

    test("200 or a 4xx naming a field for 150 seeded random bodies; a 200 ends with stop: true; the engine keeps serving", async () => {
        const next = random(20261207);
        const statuses = new Map<number, number>();
        const base = api.openai.baseURL.replace(/\/v1$/, "");
        for (let i = 0; i < 150; i++) {
            const infill = next() < 0.5;
            const body: Record<string, unknown> = infill
                ? {input_prefix: next() < 0.9 ? "def f(x):\n" : oddValue(next), input_suffix: next() < 0.9 ? "\n    return y\n" : oddValue(next),
                    prompt: "    y = ", input_extra: next() < 0.5 ? [{filename: "a.py", text: "import os\n"}] : []}
                : {prompt: next() < 0.8 ? "Once upon" : oddValue(next)};
            for (let k = 0; k < 1 + Math.floor(next() * 3); k++)
                body[fields[Math.floor(next() * fields.length)]!] = oddValue(next);
            if (typeof body.n_predict !== "number" || body.n_predict > 4 || body.n_predict < 0)
                body.n_predict = 3;
            const response = await fetch(`${base}/${infill ? "infill" : "completion"}`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify(body)});
            const text = await response.text();
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            assert.ok(response.status === 200 || (response.status >= 400 && response.status < 500), `${response.status} for ${JSON.stringify(body)}: ${text}`);
            if (response.status !== 200) {
                assert.equal(typeof (JSON.parse(text) as {error: {message: unknown}}).error.message, "string", text);
                continue;
            }
            const last = body.stream === true ? text.trimEnd().split("\n\n").at(-1)!.slice("data: ".length) : text;
            assert.equal((JSON.parse(last) as {stop: boolean}).stop, true, `${JSON.stringify(body)}: ${text.slice(-300)}`);
        }
        assert.ok((statuses.get(200) ?? 0) > 20 && (statuses.get(400) ?? 0) > 20, `both outcomes drawn: ${JSON.stringify([...statuses])}`);
        const after = await fetch(`${base}/completion`, {method: "POST", body: JSON.stringify({prompt: "Hi", n_predict: 2, ignore_eos: true})});
        assert.equal((await after.json() as {tokens_predicted: number}).tokens_predicted, 2);
    });
});
