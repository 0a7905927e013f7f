/**
 * OpenAI's Responses API (`POST /v1/responses`, what the OpenAI Agents SDK, Codex and newer clients send), the
 * part a local model can serve, read into the engine request's terms: `input` (a string, or items: messages with
 * text parts, the `function_call`s a previous answer made and their `function_call_output`s, `reasoning` items),
 * `instructions`, `max_output_tokens`, `temperature`, `top_p`, function `tools` with `tool_choice` and
 * `parallel_tool_calls`, `text.format` (JSON, or JSON fitting a schema) and `reasoning.effort: "none"`; the sampling
 * extensions of the chat endpoint (`top_k`, `min_p`, penalties, `logit_bias`, `seed`) too.
 *
 * This server keeps no state between requests, so `previous_response_id`, `conversation` and `background` are
 * refused (send the whole conversation as `input`); so are input types a text model cannot take (images, files)
 * and built-in tools (web search, file search …), each with a 400 naming where. Fields that change nothing here
 * (`store`, `include`, `truncation`, `user`, `prompt_cache_key` …) are ignored, as on the chat endpoint.
 */
import {type ChatMessage, type GenerateRequest, type ResponseFormat} from "./engineMessages.js";
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField} from "./openaiFields.js";
import {parseLogitBias, parsePenalties, schemaFormat} from "./openaiSampling.js";
import {functionName, parseToolParams, toolCallId, type ToolParams} from "./openaiTools.js";
import {isObject, type JsonObject} from "./validation.js";

type EngineFields = Pick<GenerateRequest, "temperature" | "topP" | "topK" | "minP" | "penalties" | "logitBias" | "responseFormat" | "seed" |
    "allowReasoning">;

export type ResponsesRequest = EngineFields & ToolParams & {
    messages: ChatMessage[],
    stream: boolean,
    /** Undefined when the request gave no limit (the server picks one that fits the context). */
    maxOutputTokens?: number,
    /** Echoed in the response object, as given. */
    echo: {instructions: string | null, metadata: JsonObject | null, tools: unknown[], toolChoice: unknown, text: JsonObject,
        parallelToolCalls: boolean, reasoning: JsonObject | null}
};

const maxInputItems = 10_000;
/** What would need responses kept between requests. */
const statefulFields = ["previous_response_id", "conversation"] as const;

function textOfParts(value: unknown, param: string): string {
    if (typeof value === "string")
        return value;
    if (!Array.isArray(value))
        fail(param, "expected a string or an array of content parts");
    return value.map((part, index): string => {
        if (isObject(part) && (part.type === "input_text" || part.type === "output_text") && typeof part.text === "string")
            return part.text;
        if (isObject(part) && part.type === "refusal" && typeof part.refusal === "string")
            return part.refusal;
        return fail(`${param}[${index}]`, `only text parts are supported (input_text, output_text)${isObject(part) && typeof part.type === "string"
            ? `, got type ${JSON.stringify(part.type).slice(0, 40)}` : ""}`);
    }).join("");
}

/** The last assistant message, to carry a call or a reasoning: a new one when the one before is not an assistant's. */
function assistantMessage(messages: ChatMessage[]): ChatMessage {
    const last = messages.at(-1);
    if (last?.role === "assistant")
        return last;
    const message: ChatMessage = {role: "assistant", content: ""};
    messages.push(message);
    return message;
}

function addItem(messages: ChatMessage[], item: unknown, index: number): void {
    const param = `input[${index}]`;
    if (!isObject(item))
        fail(param, "expected an object");
    const type = item.type ?? "message";
    if (type === "message") {
        const role = item.role;
        if (role !== "user" && role !== "assistant" && role !== "system" && role !== "developer")
            fail(`${param}.role`, "expected user, assistant, system or developer");
        const content = textOfParts(item.content, `${param}.content`);
        if (role === "assistant") {
            // An assistant message after its reasoning item continues the same turn.
            const last = messages.at(-1);
            if (last?.role === "assistant" && last.content === "" && last.toolCalls === undefined)
                last.content = content;
            else
                messages.push({role, content});
        } else
            messages.push({role: role === "developer" ? "system" : role, content});
        return;
    }
    if (type === "function_call") {
        if (typeof item.arguments !== "string")
            fail(`${param}.arguments`, "expected a string of JSON");
        const message = assistantMessage(messages);
        (message.toolCalls ??= []).push({id: toolCallId(item.call_id, `${param}.call_id`), name: functionName(item.name, `${param}.name`),
            arguments: item.arguments});
        return;
    }
    if (type === "function_call_output") {
        const output = item.output;
        messages.push({role: "tool", toolCallId: toolCallId(item.call_id, `${param}.call_id`), content: textOfParts(output, `${param}.output`)});
        return;
    }
    if (type === "reasoning") {
        const parts = item.content ?? item.summary;
        const text = Array.isArray(parts)
            ? parts.map((part) => isObject(part) && typeof part.text === "string" ? part.text : "").join("\n") : "";
        if (text !== "")
            assistantMessage(messages).reasoning = text;
        return;
    }
    fail(`${param}.type`, `this server takes message, function_call, function_call_output and reasoning items${typeof type === "string"
        ? `, not ${JSON.stringify(type).slice(0, 40)}` : ""}`);
}

function parseInput(value: unknown, instructions: string | null): ChatMessage[] {
    const messages: ChatMessage[] = instructions !== null ? [{role: "system", content: instructions}] : [];
    if (typeof value === "string") {
        messages.push({role: "user", content: value});
        return messages;
    }
    if (!Array.isArray(value) || value.length === 0)
        fail("input", "expected a string or a non-empty array of items");
    if (value.length > maxInputItems)
        fail("input", `at most ${maxInputItems} items`);
    value.forEach((item, index) => addItem(messages, item, index));
    return messages;
}

/** `text.format`: the Responses API's flat shape of a response format. */
function parseTextFormat(text: unknown): ResponseFormat | undefined {
    if (text === undefined || text === null)
        return undefined;
    if (!isObject(text))
        fail("text", "expected an object");
    const format = text.format;
    if (format === undefined || format === null)
        return undefined;
    if (!isObject(format))
        fail("text.format", "expected an object");
    if (format.type === "text")
        return undefined;
    if (format.type === "json_object")
        return {type: "json_object"};
    if (format.type !== "json_schema")
        fail("text.format.type", "expected text, json_object or json_schema");
    if (!isObject(format.schema))
        fail("text.format.schema", "expected a JSON schema object");
    return schemaFormat(format.schema, "text.format.schema");
}

function optionalObject(body: JsonObject, key: string): JsonObject | null {
    const value = body[key];
    if (value === undefined || value === null)
        return null;
    if (!isObject(value))
        fail(key, "expected an object");
    return value;
}

/** Validates a `POST /v1/responses` body; throws ApiRequestError naming the field. */
export function parseResponsesRequest(value: unknown): ResponsesRequest {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    const body = value;
    for (const key of statefulFields)
        if (body[key] !== undefined && body[key] !== null)
            fail(key, "this server keeps no responses or conversations: send the whole conversation as input");
    if (body.background === true)
        fail("background", "background responses are not supported");
    if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== "string")
        fail("instructions", "expected a string");
    const instructions = typeof body.instructions === "string" ? body.instructions : null;
    if (body.model !== undefined && body.model !== null && typeof body.model !== "string")
        fail("model", "expected a string");
    const reasoning = optionalObject(body, "reasoning");
    const effort = reasoning?.effort;
    if (effort !== undefined && effort !== null && typeof effort !== "string")
        fail("reasoning.effort", "expected a string");
    const metadata = optionalObject(body, "metadata");
    const tools = parseToolParams(body, "responses");
    const responseFormat = parseTextFormat(body.text);
    if (responseFormat !== undefined && tools.toolChoice !== undefined)
        fail("text.format", "cannot be used with a tool_choice that demands a call");
    const topP = optionalNumberField(body, "top_p", 0, 1, false);
    if (topP === 0)
        fail("top_p", "must be greater than 0");
    const request: ResponsesRequest = {
        ...tools,
        messages: parseInput(body.input, instructions),
        stream: optionalBooleanField(body, "stream") ?? false,
        echo: {instructions, metadata, tools: Array.isArray(body.tools) ? body.tools : [], toolChoice: body.tool_choice ?? "auto",
            text: isObject(body.text) ? body.text : {format: {type: "text"}},
            parallelToolCalls: optionalBooleanField(body, "parallel_tool_calls") ?? true, reasoning}
    };
    const maxOutputTokens = optionalNumberField(body, "max_output_tokens", 1, 1e9, true);
    if (maxOutputTokens !== undefined) request.maxOutputTokens = maxOutputTokens;
    const temperature = optionalNumberField(body, "temperature", 0, 2, false);
    if (temperature !== undefined) request.temperature = temperature;
    if (topP !== undefined) request.topP = topP;
    const topK = optionalNumberField(body, "top_k", -1, 1e9, true);
    if (topK !== undefined) request.topK = Math.max(0, topK);
    const minP = optionalNumberField(body, "min_p", 0, 1, false);
    if (minP !== undefined) request.minP = minP;
    const penalties = parsePenalties(body);
    if (penalties !== undefined) request.penalties = penalties;
    const logitBias = parseLogitBias(body.logit_bias);
    if (logitBias !== undefined && logitBias.length > 0) request.logitBias = logitBias;
    const seed = optionalNumberField(body, "seed", -(2 ** 53), 2 ** 53, true);
    if (seed !== undefined) request.seed = seed;
    if (responseFormat !== undefined) request.responseFormat = responseFormat;
    if (effort === "none")
        request.allowReasoning = false;
    return request;
}
