/**
 * What `POST /v1/messages` answers with (Anthropic's Messages API): the message and its content blocks, the
 * server-sent events of a streamed answer, and Anthropic's error shape. One declaration for the server and its tests.
 */

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
