/**
 * Anthropic's Messages API (`POST /v1/messages`, what Claude Code and the Anthropic SDKs send; llama.cpp's server and
 * Ollama serve it too), read into the engine request's terms: `system` (a string or text blocks), `messages` (user,
 * assistant, and system ones among them, as Claude Code sends) whose content is a string or blocks — text, an
 * assistant's `tool_use` and `thinking`, a user's `tool_result`; a final assistant message is a prefill the answer
 * continues — custom `tools` (`input_schema`) with `tool_choice` (auto / any / tool / none, `disable_parallel_tool_use`), `max_tokens`
 * (required, as Anthropic's), `stop_sequences`, `stream`, `thinking` (`{"type": "disabled"}` answers without
 * reasoning), `output_config.format` (JSON fitting a schema); the sampling fields Anthropic's API had (`temperature`,
 * `top_p`, `top_k`); the OpenAI endpoint's `seed` and `logit_bias` as extensions. Images and documents are refused, naming where; so are
 * Anthropic's own tool types (its server tools, and client tools with fixed schemas such as `bash_…`), except that
 * server tools a local server cannot run (web search, web fetch, code execution) are left out, as on /v1/responses.
 */
import type {ChatMessage, GenerateRequest, ResponseFormat, ToolCall, ToolChoice, ToolDefinition} from "./engineMessages.js";
import {maxStopLength, maxStopStrings, maxTools, toolNamePattern} from "./engineMessages.js";
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField} from "./openaiFields.js";
import {parseLogitBias, schemaFormat} from "./openaiSampling.js";
import {isObject, type JsonObject} from "./validation.js";

type EngineFields = Pick<GenerateRequest, "temperature" | "topP" | "topK" | "seed" | "logitBias" | "responseFormat" | "allowReasoning" | "tools" |
    "toolChoice" | "parallelToolCalls" | "continueFinalMessage">;

export type MessagesRequest = EngineFields & {
    messages: ChatMessage[],
    maxTokens: number,
    stop: string[],
    stream: boolean,
    /** The `model` field as sent (echoed in the answer). */
    model: string
};

const maxMessages = 10_000;
const maxToolUseIdLength = 200;
/** Anthropic's server tools a local server does not have: left out of what the model is offered. */
const serverSideTools = /^(web_search|web_fetch|code_execution|tool_search_tool_bm25|tool_search_tool_regex)_\d{8}$/;

function toolUseId(value: unknown, param: string): string {
    if (typeof value !== "string" || value === "" || value.length > maxToolUseIdLength)
        fail(param, `expected a string of 1 to ${maxToolUseIdLength} characters`);
    return value;
}

function toolName(value: unknown, param: string): string {
    if (typeof value !== "string" || !toolNamePattern.test(value))
        fail(param, "expected a tool name of 1 to 64 letters, digits, \"_\" or \"-\"");
    return value;
}

/** Text blocks (or a string) as one text; other block types are refused. */
function textOf(value: unknown, param: string): string {
    if (typeof value === "string")
        return value;
    if (!Array.isArray(value))
        fail(param, "expected a string or an array of text blocks");
    return value.map((block, index): string => {
        if (isObject(block) && block.type === "text" && typeof block.text === "string")
            return block.text;
        return fail(`${param}[${index}]`, `only text blocks are supported here${isObject(block) && typeof block.type === "string"
            ? `, got ${JSON.stringify(block.type).slice(0, 40)}` : ""}`);
    }).join("");
}

/** One message's blocks, appended to `out` as chat messages (a user's tool results become tool messages, in order). */
function addMessage(out: ChatMessage[], value: unknown, index: number): void {
    const param = `messages[${index}]`;
    if (!isObject(value))
        fail(param, "expected an object");
    const role = value.role;
    if (role === "system") {
        // Claude Code puts system messages among the others, as the Messages API now allows.
        out.push({role: "system", content: textOf(value.content, `${param}.content`)});
        return;
    }
    if (role !== "user" && role !== "assistant")
        fail(`${param}.role`, "expected user, assistant or system");
    const blocks: unknown[] = typeof value.content === "string" ? [{type: "text", text: value.content}]
        : Array.isArray(value.content) ? value.content : fail(`${param}.content`, "expected a string or an array of content blocks");
    let text = "";
    let reasoning = "";
    const calls: ToolCall[] = [];
    blocks.forEach((block, b) => {
        const where = `${param}.content[${b}]`;
        if (!isObject(block))
            fail(where, "expected an object");
        if (block.type === "text" && typeof block.text === "string")
            text += block.text;
        else if (role === "assistant" && block.type === "thinking" && typeof block.thinking === "string")
            reasoning += block.thinking;
        else if (role === "assistant" && block.type === "redacted_thinking")
            return;
        else if (role === "assistant" && block.type === "tool_use") {
            if (!isObject(block.input))
                fail(`${where}.input`, "expected an object");
            calls.push({id: toolUseId(block.id, `${where}.id`), name: toolName(block.name, `${where}.name`), arguments: JSON.stringify(block.input)});
        } else if (role === "user" && block.type === "tool_result") {
            const content = block.content === undefined || block.content === null ? "" : textOf(block.content, `${where}.content`);
            out.push({role: "tool", toolCallId: toolUseId(block.tool_use_id, `${where}.tool_use_id`),
                content: block.is_error === true ? `Error: ${content}` : content});
        } else
            fail(`${where}.type`, `this server takes text${role === "assistant" ? ", thinking and tool_use" : " and tool_result"} blocks${
                typeof block.type === "string" ? `, not ${JSON.stringify(block.type).slice(0, 40)}` : ""}`);
    });
    if (role === "user") {
        if (text !== "" || !blocks.some((block) => isObject(block) && block.type === "tool_result"))
            out.push({role: "user", content: text});
        return;
    }
    out.push({role: "assistant", content: text, ...calls.length > 0 ? {toolCalls: calls} : {}, ...reasoning !== "" ? {reasoning} : {}});
}

function parseTools(value: unknown): ToolDefinition[] | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (!Array.isArray(value) || value.length > maxTools)
        fail("tools", `expected an array of at most ${maxTools} tools`);
    const names = new Set<string>();
    return value.flatMap((tool, index): ToolDefinition[] => {
        const param = `tools[${index}]`;
        if (!isObject(tool))
            fail(param, "expected an object");
        if (typeof tool.type === "string" && serverSideTools.test(tool.type))
            return [];
        if (tool.type !== undefined && tool.type !== null && tool.type !== "custom")
            fail(`${param}.type`, `only custom tools (with an input_schema) are supported, got ${JSON.stringify(tool.type).slice(0, 40)}`);
        const name = toolName(tool.name, `${param}.name`);
        if (names.has(name))
            fail("tools", `the tool ${name} is given twice`);
        names.add(name);
        if (!isObject(tool.input_schema))
            fail(`${param}.input_schema`, "expected a JSON schema object");
        if (tool.description !== undefined && tool.description !== null && typeof tool.description !== "string")
            fail(`${param}.description`, "expected a string");
        return [{name, parameters: tool.input_schema, ...typeof tool.description === "string" ? {description: tool.description} : {}}];
    });
}

/** `tool_choice`: the engine's choice, "none" (no tools offered), or undefined (auto); and whether parallel calls are off. */
function parseToolChoice(value: unknown, tools: ToolDefinition[] | undefined): {choice?: ToolChoice | "none", parallel?: boolean} {
    if (value === undefined || value === null)
        return {};
    if (!isObject(value))
        fail("tool_choice", "expected an object");
    const parallel = optionalBooleanField(value, "disable_parallel_tool_use") === true ? {parallel: false} : {};
    if (value.type === "auto")
        return parallel;
    if (value.type === "none")
        return {choice: "none"};
    if (value.type !== "any" && value.type !== "tool")
        fail("tool_choice.type", "expected auto, any, tool or none");
    if (tools === undefined || tools.length === 0)
        fail("tool_choice", "a tool call is demanded but no tools are given");
    if (value.type === "any")
        return {choice: "required", ...parallel};
    const name = toolName(value.name, "tool_choice.name");
    if (!tools.some((tool) => tool.name === name))
        fail("tool_choice.name", `the tool ${name} is not among the tools`);
    return {choice: {name}, ...parallel};
}

function parseStopSequences(value: unknown): string[] {
    if (value === undefined || value === null)
        return [];
    if (!Array.isArray(value) || value.length > maxStopStrings)
        fail("stop_sequences", `expected an array of at most ${maxStopStrings} strings`);
    return value.map((item, index) => {
        if (typeof item !== "string" || item === "" || item.length > maxStopLength)
            fail(`stop_sequences[${index}]`, `expected a non-empty string of at most ${maxStopLength} characters`);
        return item;
    });
}

/** `output_config.format`: JSON fitting a schema (Anthropic's structured outputs), sampled under a grammar. */
function parseOutputFormat(config: unknown): ResponseFormat | undefined {
    if (config === undefined || config === null)
        return undefined;
    if (!isObject(config))
        fail("output_config", "expected an object");
    const format = config.format;
    if (format === undefined || format === null)
        return undefined;
    if (!isObject(format) || format.type !== "json_schema" || !isObject(format.schema))
        fail("output_config.format", "expected {\"type\": \"json_schema\", \"schema\": {…}}");
    return schemaFormat(format.schema, "output_config.format.schema");
}

/**
 * Validates a `POST /v1/messages` body (with `countOnly`, a `count_tokens` one: no `max_tokens`); throws ApiRequestError
 * naming the field.
 */
export function parseMessagesRequest(value: unknown, countOnly = false): MessagesRequest {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    const body: JsonObject = value;
    if (typeof body.model !== "string" || body.model === "")
        fail("model", "expected the model's name");
    const maxTokens = countOnly ? 1 : optionalNumberField(body, "max_tokens", 1, 1e9, true) ?? fail("max_tokens", "required");
    if (!Array.isArray(body.messages) || body.messages.length === 0)
        fail("messages", "expected a non-empty array");
    if (body.messages.length > maxMessages)
        fail("messages", `at most ${maxMessages} messages`);
    const messages: ChatMessage[] = [];
    if (body.system !== undefined && body.system !== null)
        messages.push({role: "system", content: textOf(body.system, "system")});
    body.messages.forEach((message, index) => addMessage(messages, message, index));
    const tools = parseTools(body.tools);
    const {choice, parallel} = parseToolChoice(body.tool_choice, tools);
    const thinking = body.thinking;
    if (thinking !== undefined && thinking !== null && (!isObject(thinking) || typeof thinking.type !== "string"))
        fail("thinking", "expected {\"type\": \"enabled\" | \"adaptive\" | \"disabled\" …}");
    const responseFormat = parseOutputFormat(body.output_config);
    const request: MessagesRequest = {messages, maxTokens, stop: parseStopSequences(body.stop_sequences),
        stream: optionalBooleanField(body, "stream") ?? false, model: body.model};
    // A final assistant message is a prefill: the answer continues it.
    if (messages.at(-1)?.role === "assistant")
        request.continueFinalMessage = true;
    if (tools !== undefined && tools.length > 0 && choice !== "none") {
        request.tools = tools;
        if (choice !== undefined) request.toolChoice = choice;
        if (parallel !== undefined) request.parallelToolCalls = parallel;
    }
    const temperature = optionalNumberField(body, "temperature", 0, 1, false);
    if (temperature !== undefined) request.temperature = temperature;
    const topP = optionalNumberField(body, "top_p", 0, 1, false);
    if (topP === 0)
        fail("top_p", "must be greater than 0");
    if (topP !== undefined) request.topP = topP;
    const topK = optionalNumberField(body, "top_k", 0, 1e9, true);
    if (topK !== undefined) request.topK = topK;
    const seed = optionalNumberField(body, "seed", -(2 ** 53), 2 ** 53, true);
    if (seed !== undefined) request.seed = seed;
    const logitBias = parseLogitBias(body.logit_bias);
    if (logitBias !== undefined && logitBias.length > 0) request.logitBias = logitBias;
    if (isObject(thinking) && thinking.type === "disabled")
        request.allowReasoning = false;
    if (responseFormat !== undefined) {
        if (request.toolChoice !== undefined)
            fail("output_config.format", "cannot be used with a tool_choice that demands a call");
        request.responseFormat = responseFormat;
    }
    return request;
}
