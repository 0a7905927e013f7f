/**
 * What `POST /v1/responses` answers with (OpenAI's Responses API): the response object and its output items
 * (a reasoning item, the assistant message, function calls), and the server-sent events a streamed response is
 * made of. One declaration for the server and its tests; and for a client reading any server's Responses traffic
 * (the monitoring proxy), what an event or a response object carries.
 */
import type {StreamChunkContent} from "./openaiApi.js";
import {isObject, type JsonObject} from "./validation.js";

export type OutputText = {type: "output_text", text: string, annotations: []};
export type ReasoningText = {type: "reasoning_text", text: string};
type ItemStatus = "in_progress" | "completed" | "incomplete";

export type ReasoningItem = {type: "reasoning", id: string, summary: [], content: ReasoningText[], status: ItemStatus};
export type MessageItem = {type: "message", id: string, role: "assistant", status: ItemStatus, content: OutputText[]};
export type FunctionCallItem = {
    type: "function_call", id: string, call_id: string, name: string, arguments: string, status: ItemStatus,
    /** The namespace tool the function was given in. */
    namespace?: string
};
export type OutputItem = ReasoningItem | MessageItem | FunctionCallItem;

export type ResponseUsage = {
    input_tokens: number, input_tokens_details: {cached_tokens: number},
    output_tokens: number, output_tokens_details: {reasoning_tokens: number},
    total_tokens: number
};

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

export type ResponseObject = {
    id: string, object: "response", created_at: number, status: ResponseStatus,
    /** When it finished (Unix seconds); null before. */
    completed_at: number | null,
    error: {code: string, message: string} | null,
    incomplete_details: {reason: "max_output_tokens"} | null,
    instructions: string | null, metadata: JsonObject | null, model: string,
    output: OutputItem[],
    /** The SDKs' convenience: the text of the output's messages, joined. */
    output_text: string,
    parallel_tool_calls: boolean, temperature: number | null, top_p: number | null, max_output_tokens: number | null,
    tool_choice: unknown, tools: unknown[], text: JsonObject, reasoning: JsonObject | null,
    store: false, usage: ResponseUsage | null
};

/** The events of a streamed response, each sent as `event: TYPE` + `data: {…, "sequence_number": N}`. */
export type ResponseEvent =
    | {type: "response.created" | "response.in_progress" | "response.completed" | "response.incomplete" | "response.failed", response: ResponseObject}
    | {type: "response.output_item.added" | "response.output_item.done", output_index: number, item: OutputItem}
    | {type: "response.content_part.added" | "response.content_part.done", item_id: string, output_index: number, content_index: number,
        part: OutputText | ReasoningText}
    | {type: "response.output_text.delta", item_id: string, output_index: number, content_index: number, delta: string, logprobs: []}
    | {type: "response.output_text.done", item_id: string, output_index: number, content_index: number, text: string, logprobs: []}
    | {type: "response.reasoning_text.delta", item_id: string, output_index: number, content_index: number, delta: string}
    | {type: "response.reasoning_text.done", item_id: string, output_index: number, content_index: number, text: string}
    | {type: "response.function_call_arguments.delta", item_id: string, output_index: number, delta: string}
    | {type: "response.function_call_arguments.done", item_id: string, output_index: number, name: string, arguments: string}
    | {type: "error", code: string | null, message: string, param: string | null};

/** Events whose `delta` is generated text: the answer's, the reasoning's, a call's arguments, a refusal's. */
const deltaEvents = new Set(["response.output_text.delta", "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
    "response.function_call_arguments.delta", "response.refusal.delta"]);

/**
 * What one Responses API stream event carries for a client reading any server's stream (the monitoring proxy), in
 * the chat stream's terms; undefined when `value` is not a Responses event. Every delta of generated text counts
 * as output (the first one: TTFT); the final event gives the usage and how the response ended.
 */
export function responsesEventContent(value: unknown): StreamChunkContent | undefined {
    if (!isObject(value) || typeof value.type !== "string" || !(value.type.startsWith("response.") || value.type === "error"))
        return undefined;
    if (value.type === "error")
        return {text: "", finishReason: null, error: typeof value.message === "string" ? value.message : "error"};
    if (deltaEvents.has(value.type))
        return {text: typeof value.delta === "string" ? value.delta : "", finishReason: null};
    if (value.type === "response.completed" || value.type === "response.incomplete" || value.type === "response.failed")
        return responseObjectContent(value.response) ?? {text: "", finishReason: null};
    return {text: "", finishReason: null};
}

/**
 * A whole Responses API response object in the same terms: the text of its messages, reasoning and calls, how it
 * ended ("stop", "length", or an error), its usage; undefined when `value` is not a response object.
 */
export function responseObjectContent(value: unknown, withText = false): StreamChunkContent | undefined {
    if (!isObject(value) || value.object !== "response")
        return undefined;
    const finishReason = value.status === "completed" ? "stop" : value.status === "incomplete" ? "length" : null;
    const content: StreamChunkContent = {text: "", finishReason};
    if (value.status === "failed")
        content.error = isObject(value.error) && typeof value.error.message === "string" ? value.error.message : "the response failed";
    if (withText && Array.isArray(value.output))
        content.text = value.output.map(itemText).join("");
    const usage = value.usage;
    if (isObject(usage) && typeof usage.input_tokens === "number" && typeof usage.output_tokens === "number") {
        const {input_tokens: prompt, output_tokens: completion} = usage;
        content.usage = {prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion};
        const details = usage.input_tokens_details;
        if (isObject(details) && typeof details.cached_tokens === "number")
            content.usage.prompt_tokens_details = {cached_tokens: details.cached_tokens};
    }
    return content;
}

function itemText(item: unknown): string {
    if (!isObject(item))
        return "";
    if (item.type === "function_call")
        return typeof item.arguments === "string" ? item.arguments : "";
    const parts = Array.isArray(item.content) ? item.content : [];
    return parts.map((part) => isObject(part) && typeof part.text === "string" ? part.text : "").join("");
}
