/**
 * OpenAI's tool-calling fields: `tools` (functions with JSON-schema parameters), `tool_choice`,
 * `parallel_tool_calls`, and in the messages, an assistant's `tool_calls` and the `tool` messages that
 * answer them (also in the legacy shapes: an assistant's `function_call`, `function` messages) — read into
 * the engine request's terms. The legacy request fields `functions` / `function_call` are not served: their
 * answers have another shape; `functions` is ignored (the model answers in text) and a forced
 * `function_call` is refused.
 */
import {maxTools, toolNamePattern, type ChatMessage, type ToolCall, type ToolChoice, type ToolDefinition} from "./engineMessages.js";
import {fail, optionalBooleanField} from "./openaiFields.js";
import {isObject, type JsonObject} from "./validation.js";

/**
 * What a chat request asks of tools; `tools` is absent when none are offered (or `tool_choice` is "none").
 * `namespaces` (Responses API): the namespace of each function given inside a `namespace` tool, by function name.
 */
export type ToolParams = {
    tools?: ToolDefinition[], toolChoice?: ToolChoice, parallelToolCalls?: boolean, namespaces?: Record<string, string>
};

/**
 * Responses API tools that OpenAI's servers run themselves (searching the web or files, running code, MCP servers
 * …): a local server has none, so they are left out of what the model is offered (Codex sends `web_search` with
 * every request).
 */
const serverSideTools = /^(web_search|web_search_preview|file_search|code_interpreter|image_generation|mcp|computer_use|computer_use_preview)(_\d{4}_\d{2}_\d{2})?$/;

const maxToolCallIdLength = 200;

export function toolCallId(value: unknown, param: string): string {
    if (typeof value !== "string" || value === "" || value.length > maxToolCallIdLength)
        fail(param, `expected a string of 1 to ${maxToolCallIdLength} characters`);
    return value;
}

export function functionName(value: unknown, param: string): string {
    if (typeof value !== "string" || !toolNamePattern.test(value))
        fail(param, "expected a function name of 1 to 64 letters, digits, \"_\" or \"-\"");
    return value;
}

function parseFunction(value: unknown, param: string): ToolDefinition {
    if (!isObject(value))
        fail(param, "expected an object");
    const tool: ToolDefinition = {name: functionName(value.name, `${param}.name`)};
    if (value.description !== undefined && value.description !== null) {
        if (typeof value.description !== "string")
            fail(`${param}.description`, "expected a string");
        tool.description = value.description;
    }
    if (value.parameters !== undefined && value.parameters !== null) {
        if (!isObject(value.parameters))
            fail(`${param}.parameters`, "expected a JSON schema object");
        tool.parameters = value.parameters;
    }
    return tool;
}

/**
 * Where a request's tools come from: Chat Completions nests a function in each tool (`{"type": "function",
 * "function": {"name", …}}`, `tool_choice: {"type": "function", "function": {"name"}}`); the Responses API puts its
 * fields in the tool itself (`{"type": "function", "name", …}`, `tool_choice: {"type": "function", "name"}`).
 */
export type ToolShape = "chat" | "responses";

/** A Responses API tool: a function, the functions of a namespace, or nothing for a tool OpenAI's servers run. */
function parseResponsesTool(entry: JsonObject, index: number, namespaces: Record<string, string>): ToolDefinition[] {
    if (entry.type === "function")
        return [parseFunction(entry, `tools[${index}]`)];
    if (typeof entry.type === "string" && serverSideTools.test(entry.type))
        return [];
    if (entry.type !== "namespace")
        fail(`tools[${index}].type`, "only \"function\" and \"namespace\" tools are supported (and built-in tools this server does not have are left out)");
    if (typeof entry.name !== "string" || entry.name === "")
        fail(`tools[${index}].name`, "expected the namespace's name");
    const nested = entry.tools;
    if (!Array.isArray(nested) || nested.length > maxTools)
        fail(`tools[${index}].tools`, `expected an array of at most ${maxTools} function tools`);
    return nested.map((tool, inner) => {
        if (!isObject(tool) || tool.type !== "function")
            fail(`tools[${index}].tools[${inner}].type`, "only \"function\" tools are supported in a namespace");
        const parsed = parseFunction(tool, `tools[${index}].tools[${inner}]`);
        namespaces[parsed.name] = entry.name as string;
        return parsed;
    });
}

function parseTools(value: unknown, shape: ToolShape, namespaces: Record<string, string>): ToolDefinition[] | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (!Array.isArray(value) || value.length > maxTools)
        fail("tools", `expected an array of at most ${maxTools} tools`);
    const tools = value.flatMap((entry, index) => {
        if (!isObject(entry) || (shape === "chat" && entry.type !== "function"))
            fail(`tools[${index}].type`, "only \"function\" tools are supported");
        return shape === "chat" ? [parseFunction(entry.function, `tools[${index}].function`)] : parseResponsesTool(entry, index, namespaces);
    });
    if (tools.length > maxTools)
        fail("tools", `at most ${maxTools} functions in all`);
    const names = new Set<string>();
    for (const tool of tools) {
        if (names.has(tool.name))
            fail("tools", `the function ${tool.name} is given twice`);
        names.add(tool.name);
    }
    return tools;
}

function parseToolChoice(value: unknown, tools: ToolDefinition[] | undefined, shape: ToolShape): ToolChoice | "none" | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (value === "none" || value === "auto")
        return value;
    let choice: ToolChoice;
    if (value === "required")
        choice = "required";
    else if (shape === "chat" && isObject(value) && value.type === "function" && isObject(value.function))
        choice = {name: functionName(value.function.name, "tool_choice.function.name")};
    else if (shape === "responses" && isObject(value) && value.type === "function")
        choice = {name: functionName(value.name, "tool_choice.name")};
    else
        fail("tool_choice", `expected "none", "auto", "required" or ${shape === "chat"
            ? "{\"type\": \"function\", \"function\": {\"name\": …}}" : "{\"type\": \"function\", \"name\": …}"}`);
    if (tools === undefined || tools.length === 0)
        fail("tool_choice", "a tool call is demanded but no tools are given");
    if (typeof choice === "object" && !tools.some((tool) => tool.name === choice.name))
        fail("tool_choice", `the function ${choice.name} is not among the tools`);
    return choice;
}

/** The request's tool fields. */
export function parseToolParams(body: JsonObject, shape: ToolShape = "chat"): ToolParams {
    const legacyChoice = body.function_call;
    if (shape === "chat" && legacyChoice !== undefined && legacyChoice !== null && legacyChoice !== "auto" && legacyChoice !== "none")
        fail("function_call", "the legacy function_call is not supported: use tools and tool_choice");
    const namespaces: Record<string, string> = {};
    const tools = parseTools(body.tools, shape, namespaces);
    const choice = parseToolChoice(body.tool_choice, tools, shape);
    const parallel = optionalBooleanField(body, "parallel_tool_calls");
    if (tools === undefined || tools.length === 0 || choice === "none")
        return {};
    return {tools, ...choice !== undefined && choice !== "auto" ? {toolChoice: choice} : {}, ...parallel !== undefined ? {parallelToolCalls: parallel} : {},
        ...Object.keys(namespaces).length > 0 ? {namespaces} : {}};
}

function parseToolCall(value: unknown, param: string): ToolCall {
    if (!isObject(value))
        fail(param, "expected an object");
    const id = toolCallId(value.id, `${param}.id`);
    if (value.type !== undefined && value.type !== "function")
        fail(`${param}.type`, "only \"function\" calls are supported");
    const fn = value.function;
    if (!isObject(fn))
        fail(`${param}.function`, "expected an object");
    if (typeof fn.arguments !== "string")
        fail(`${param}.function.arguments`, "expected a string of JSON");
    return {id, name: functionName(fn.name, `${param}.function.name`), arguments: fn.arguments};
}

/** An assistant message's `tool_calls` (or legacy `function_call`), if any. */
export function parseMessageToolCalls(message: JsonObject, param: string): ToolCall[] | undefined {
    if (message.function_call !== undefined && message.function_call !== null) {
        const call = message.function_call;
        if (!isObject(call) || typeof call.arguments !== "string")
            fail(`${param}.function_call`, "expected {\"name\": …, \"arguments\": \"…\"}");
        return [{id: `${param}.function_call`, name: functionName(call.name, `${param}.function_call.name`), arguments: call.arguments}];
    }
    const calls = message.tool_calls;
    if (calls === undefined || calls === null)
        return undefined;
    if (!Array.isArray(calls) || calls.length > maxTools)
        fail(`${param}.tool_calls`, `expected an array of at most ${maxTools} calls`);
    return calls.map((call, index) => parseToolCall(call, `${param}.tool_calls[${index}]`));
}

/** A `tool` message's `tool_call_id` (absent for the legacy `function` role, answered in order). */
export function toolMessageFields(message: JsonObject, param: string): Pick<ChatMessage, "toolCallId"> {
    if (message.role === "function")
        return {};
    return {toolCallId: toolCallId(message.tool_call_id, `${param}.tool_call_id`)};
}
