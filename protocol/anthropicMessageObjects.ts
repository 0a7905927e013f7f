/**
 * What `POST /v1/messages` answers with (Anthropic's Messages API): the message and its content blocks, the
 * server-sent events of a streamed answer, and Anthropic's error shape. One declaration for the server and its tests;
 * and for a client reading any server's Anthropic traffic (the monitoring proxy), what an event or an answer carries.
 */
import {isObject} from "./validation.js";

export type TextBlock = {type: "text", text: string};
/** A reasoning model's reasoning. Anthropic signs its own; a local model's carry an empty signature. */
export type ThinkingBlock = {type: "thinking", thinking: string, signature: string};
export type ToolUseBlock = {type: "tool_use", id: string, name: string, input: unknown};
export type ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock;

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export type MessagesUsage = {
    input_tokens: number, output_tokens: number,
    /** Prompt tokens served from the prefix cache (Anthropic's cache reads); this server writes no separate cache. */
    cache_read_input_tokens: number, cache_creation_input_tokens: number
};

export type AnthropicMessage = {
    id: string, type: "message", role: "assistant", model: string, content: ContentBlock[],
    stop_reason: StopReason | null, stop_sequence: string | null, usage: MessagesUsage
};

/** The events of a streamed answer, each sent as `event: TYPE` + `data: {"type": TYPE, …}`. */
export type MessagesEvent =
    | {type: "message_start", message: AnthropicMessage}
    | {type: "content_block_start", index: number, content_block: ContentBlock}
    | {type: "content_block_delta", index: number, delta: {type: "text_delta", text: string} | {type: "thinking_delta", thinking: string} |
        {type: "signature_delta", signature: string} | {type: "input_json_delta", partial_json: string}}
    | {type: "content_block_stop", index: number}
    | {type: "message_delta", delta: {stop_reason: StopReason, stop_sequence: string | null}, usage: {output_tokens: number}}
    | {type: "message_stop"}
    | {type: "error", error: {type: string, message: string}};

/** Anthropic's error body; `type` from the HTTP status, as Anthropic's API names them. */
export type AnthropicErrorBody = {type: "error", error: {type: string, message: string}};

export function anthropicErrorType(status: number): string {
    switch (status) {
        case 400: return "invalid_request_error";
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 413: return "request_too_large";
        case 429: return "rate_limit_error";
        case 503: return "overloaded_error";
        default: return "api_error";
    }
}

/**
 * What one event of a streamed Anthropic answer, or a whole answer, tells a client reading any server's traffic (the
 * monitoring proxy): the generated text in it (text, thinking, a tool call's input — all output), and what it says
 * of the request's end; undefined when `value` is neither. Counts are absent where the event does not give them
 * (`message_start` gives the input tokens, `message_delta` the output tokens).
 */
export type AnthropicTraffic = {text: string, finishReason?: string, promptTokens?: number, completionTokens?: number, error?: string};

export function anthropicTraffic(value: unknown): AnthropicTraffic | undefined {
    if (!isObject(value) || typeof value.type !== "string")
        return undefined;
    switch (value.type) {
        case "message_start":
            return isObject(value.message) ? {text: "", ...usageCounts(value.message.usage)} : {text: ""};
        case "content_block_start": case "content_block_stop": case "message_stop": case "ping":
            return {text: ""};
        case "content_block_delta": {
            const delta = isObject(value.delta) ? value.delta : {};
            const text = delta.text ?? delta.thinking ?? delta.partial_json;
            return {text: typeof text === "string" ? text : ""};
        }
        case "message_delta": {
            const reason = isObject(value.delta) ? value.delta.stop_reason : undefined;
            return {text: "", ...usageCounts(value.usage), ...typeof reason === "string" ? {finishReason: finishReasonOf(reason)} : {}};
        }
        case "error":
            return {text: "", error: isObject(value.error) && typeof value.error.message === "string" ? value.error.message : "error"};
        case "message": {
            const blocks = Array.isArray(value.content) ? value.content : [];
            const text = blocks.map((block) => !isObject(block) ? "" : typeof block.text === "string" ? block.text
                : typeof block.thinking === "string" ? block.thinking : block.type === "tool_use" ? JSON.stringify(block.input) : "").join("");
            return {text, ...usageCounts(value.usage), ...typeof value.stop_reason === "string" ? {finishReason: finishReasonOf(value.stop_reason)} : {}};
        }
        default:
            return undefined;
    }
}

/** Anthropic's stop reasons in the chat API's terms. */
function finishReasonOf(stopReason: string): string {
    return stopReason === "max_tokens" ? "length" : stopReason === "tool_use" ? "tool_calls" : "stop";
}

/** Input tokens count the cached ones apart (Anthropic's usage); the prompt is all of them. */
function usageCounts(usage: unknown): Pick<AnthropicTraffic, "promptTokens" | "completionTokens"> {
    if (!isObject(usage))
        return {};
    const counts: Pick<AnthropicTraffic, "promptTokens" | "completionTokens"> = {};
    if (typeof usage.input_tokens === "number") {
        const cached = [usage.cache_read_input_tokens, usage.cache_creation_input_tokens].reduce<number>((sum, value) =>
            sum + (typeof value === "number" ? value : 0), 0);
        counts.promptTokens = usage.input_tokens + cached;
    }
    if (typeof usage.output_tokens === "number" && usage.output_tokens > 0)
        counts.completionTokens = usage.output_tokens;
    return counts;
}
