/**
 * `POST /v1/messages` (Anthropic's Messages API) on the Engine: one validated request becomes one engine request,
 * queued, scheduled and measured like every other, answered as one message or as Anthropic's server-sent events
 * (`message_start`, content blocks with their deltas, `message_delta`, `message_stop`). As llama.cpp's server does,
 * `max_tokens` is an upper bound lowered to what the context leaves (Claude Code asks for 32000 on every request).
 */
import {randomBytes} from "node:crypto";
import type {
    AnthropicMessage, ContentBlock, MessagesEvent, MessagesUsage, StopReason, ToolUseBlock
} from "../../../protocol/anthropicMessageObjects.js";
import type {MessagesRequest} from "../../../protocol/anthropicMessages.js";
import type {GeneratedToolCall} from "../../../protocol/engineMessages.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {GenerationSource} from "../chat/generationInput.js";
import {type GenerationContext, type RefusalFields, refusal, runEngineRequest} from "../openai/engineRequest.js";
import {startEventStream} from "../net/eventStream.js";

const fields: RefusalFields = {responseFormat: "output_config.format", maxTokens: "max_tokens"};

const blockId = (prefix: string): string => `${prefix}_${randomBytes(12).toString("hex")}`;

export async function serveMessages(body: MessagesRequest, context: GenerationContext): Promise<void> {
    const {messages, tools, toolChoice, parallelToolCalls, allowReasoning, continueFinalMessage} = body;
    const input: GenerationSource = {messages, ...tools !== undefined ? {tools} : {}, ...toolChoice !== undefined ? {toolChoice} : {},
        ...parallelToolCalls !== undefined ? {parallelToolCalls} : {}, ...allowReasoning !== undefined ? {allowReasoning} : {},
        ...continueFinalMessage !== undefined ? {continueFinalMessage} : {}};
    const {temperature, topP, topK, stop, maxTokens, seed, logitBias, responseFormat} = body;
    const params = {maxTokens, clampToContext: true, temperature, topP, topK, stop, seed, logitBias, responseFormat};
    await runEngineRequest(context, input, params, fields, async (handle) => {
        const id = `msg_${handle.id.replaceAll("-", "")}`;
        if (body.stream)
            await stream(id, body.model, handle, context);
        else
            await respondWhole(id, body.model, handle, context);
    });
}

function toolUse(call: GeneratedToolCall): ToolUseBlock {
    return {type: "tool_use", id: blockId("toolu"), name: call.name, input: JSON.parse(call.arguments) as unknown};
}

function stopOf(result: RequestResult): {stop_reason: StopReason, stop_sequence: string | null} {
    if (result.toolCalls !== undefined && result.toolCalls.length > 0)
        return {stop_reason: "tool_use", stop_sequence: null};
    if (result.reason === "length")
        return {stop_reason: "max_tokens", stop_sequence: null};
    if (result.stopString !== undefined)
        return {stop_reason: "stop_sequence", stop_sequence: result.stopString};
    return {stop_reason: "end_turn", stop_sequence: null};
}

/** Anthropic counts prompt tokens read from its cache apart from `input_tokens`; so does this server, for its prefix cache. */
function usageOf(promptTokens: number, cachedTokens: number, outputTokens: number): MessagesUsage {
    return {input_tokens: promptTokens - cachedTokens, output_tokens: outputTokens, cache_read_input_tokens: cachedTokens,
        cache_creation_input_tokens: 0};
}

async function respondWhole(id: string, model: string, handle: RequestHandle, {client, response}: GenerationContext): Promise<void> {
    const result = await handle.done;
    if (result.reason === "abort" && response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort")
        throw refusal(result, client, fields);
    const content: ContentBlock[] = [];
    if (result.reasoning !== undefined && result.reasoning.text !== "")
        content.push({type: "thinking", thinking: result.reasoning.text, signature: ""});
    if (result.text !== "" || (result.toolCalls ?? []).length === 0)
        content.push({type: "text", text: result.text});
    content.push(...(result.toolCalls ?? []).map(toolUse));
    const message: AnthropicMessage = {id, type: "message", role: "assistant", model, content, ...stopOf(result),
        usage: usageOf(result.promptTokens, result.cachedTokens, result.generatedTokens)};
    const text = JSON.stringify(message);
    response.writeHead(200, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

async function stream(id: string, model: string, handle: RequestHandle, {response, ssePingIntervalMs}: GenerationContext): Promise<void> {
    const writeEvents = startEventStream(response, ssePingIntervalMs);
    const send = (event: MessagesEvent): void => writeEvents(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    const promptTokens = handle.promptTokens ?? 0;
    send({type: "message_start", message: {id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null,
        usage: usageOf(promptTokens, 0, 0)}});
    // The open block: its index and kind; a new kind of output closes it and opens the next.
    let open: {index: number, kind: "thinking" | "text"} | undefined;
    let next = 0;
    const close = (): void => {
        if (open === undefined)
            return;
        if (open.kind === "thinking")
            send({type: "content_block_delta", index: open.index, delta: {type: "signature_delta", signature: ""}});
        send({type: "content_block_stop", index: open.index});
        open = undefined;
    };
    const write = (kind: "thinking" | "text", text: string): void => {
        if (open?.kind !== kind) {
            close();
            open = {index: next++, kind};
            send({type: "content_block_start", index: open.index,
                content_block: kind === "text" ? {type: "text", text: ""} : {type: "thinking", thinking: "", signature: ""}});
        }
        send({type: "content_block_delta", index: open.index,
            delta: kind === "text" ? {type: "text_delta", text} : {type: "thinking_delta", thinking: text}});
    };
    for await (const piece of handle) {
        if (piece.reasoning !== undefined && piece.reasoning !== "")
            write("thinking", piece.reasoning);
        if (piece.text !== "")
            write("text", piece.text);
    }
    const result = await handle.done;
    if (response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort") {
        send({type: "error", error: {type: "api_error", message: result.error ?? "the request was cancelled"}});
        response.end();
        return;
    }
    close();
    // Calls arrive whole, after the text: the engine knows a call only once it has ended.
    for (const call of result.toolCalls ?? []) {
        const block = toolUse(call);
        const index = next++;
        send({type: "content_block_start", index, content_block: {...block, input: {}}});
        send({type: "content_block_delta", index, delta: {type: "input_json_delta", partial_json: call.arguments}});
        send({type: "content_block_stop", index});
    }
    send({type: "message_delta", delta: stopOf(result), usage: {output_tokens: result.generatedTokens}});
    send({type: "message_stop"});
    response.end();
}
