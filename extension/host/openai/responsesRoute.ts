/**
 * `POST /v1/responses` (OpenAI's Responses API) on the Engine: one validated request becomes one engine request,
 * queued, scheduled and measured like every other, answered as one response object or as the Responses API's
 * server-sent events (`response.created`, the output items with their text deltas, `response.completed`). As on
 * the chat endpoint, the status line waits until the engine has queued the request, so a refused one gets its 4xx.
 */
import type {ResponseEvent} from "../../../protocol/openaiResponseObjects.js";
import type {ResponsesRequest} from "../../../protocol/openaiResponses.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {GenerationSource} from "../chat/generationInput.js";
import {type GenerationContext, type RefusalFields, refusal, runEngineRequest} from "./engineRequest.js";
import {ResponseBuilder} from "./responseBuilder.js";
import {startEventStream} from "../net/eventStream.js";

const fields: RefusalFields = {responseFormat: "text.format", maxTokens: "max_output_tokens"};

export async function serveResponse(body: ResponsesRequest, context: GenerationContext): Promise<void> {
    const {messages, tools, toolChoice, parallelToolCalls, allowReasoning} = body;
    const input: GenerationSource = {messages, ...tools !== undefined ? {tools} : {}, ...toolChoice !== undefined ? {toolChoice} : {},
        ...parallelToolCalls !== undefined ? {parallelToolCalls} : {}, ...allowReasoning !== undefined ? {allowReasoning} : {}};
    const {temperature, topP, topK, minP, penalties, logitBias, responseFormat, seed, maxOutputTokens} = body;
    const params = {maxTokens: maxOutputTokens, temperature, topP, topK, minP, penalties, logitBias, responseFormat, seed};
    await runEngineRequest(context, input, params, fields, async (handle) => {
        const builder = new ResponseBuilder(handle.id, context.modelId, body);
        if (body.stream)
            await stream(builder, handle, context);
        else
            await respondWhole(builder, handle, context);
    });
}

async function respondWhole(builder: ResponseBuilder, handle: RequestHandle, {client, response}: GenerationContext): Promise<void> {
    const result = await handle.done;
    if (result.reason === "abort" && response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort")
        throw refusal(result, client, fields);
    if (result.reasoning !== undefined && result.reasoning.text !== "")
        builder.reasoning().item.content[0]!.text = result.reasoning.text;
    if (result.text !== "")
        builder.message().item.content[0]!.text = result.text;
    builder.finish(result);
    const text = JSON.stringify(builder.snapshot());
    response.writeHead(200, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

/** Writes the Responses API's events: `event: TYPE` and `data: {…}` with a sequence number, in order. */
class EventWriter {
    private sequence = 0;

    constructor(private readonly write: (text: string) => void) {}

    send(event: ResponseEvent): void {
        this.write(`event: ${event.type}\ndata: ${JSON.stringify({...event, sequence_number: this.sequence++})}\n\n`);
    }
}

async function stream(builder: ResponseBuilder, handle: RequestHandle, {response, ssePingIntervalMs}: GenerationContext): Promise<void> {
    const events = new EventWriter(startEventStream(response, ssePingIntervalMs));
    events.send({type: "response.created", response: builder.snapshot()});
    events.send({type: "response.in_progress", response: builder.snapshot()});
    let reasoningOpen = false;
    let messageOpen = false;
    const closeReasoning = (): void => {
        if (!reasoningOpen)
            return;
        reasoningOpen = false;
        const {item, index} = builder.reasoning();
        const part = item.content[0]!;
        events.send({type: "response.reasoning_text.done", item_id: item.id, output_index: index, content_index: 0, text: part.text});
        events.send({type: "response.content_part.done", item_id: item.id, output_index: index, content_index: 0, part});
        events.send({type: "response.output_item.done", output_index: index, item});
    };
    for await (const piece of handle) {
        if (piece.reasoning !== undefined && piece.reasoning !== "") {
            const {item, index, created} = builder.reasoning();
            if (created) {
                reasoningOpen = true;
                events.send({type: "response.output_item.added", output_index: index, item: {...item, content: []}});
                events.send({type: "response.content_part.added", item_id: item.id, output_index: index, content_index: 0,
                    part: {type: "reasoning_text", text: ""}});
            }
            item.content[0]!.text += piece.reasoning;
            events.send({type: "response.reasoning_text.delta", item_id: item.id, output_index: index, content_index: 0, delta: piece.reasoning});
        }
        if (piece.text !== "") {
            const {item, index, created} = builder.message();
            closeReasoning();
            if (created) {
                messageOpen = true;
                events.send({type: "response.output_item.added", output_index: index, item: {...item, content: []}});
                events.send({type: "response.content_part.added", item_id: item.id, output_index: index, content_index: 0,
                    part: {type: "output_text", text: "", annotations: []}});
            }
            item.content[0]!.text += piece.text;
            events.send({type: "response.output_text.delta", item_id: item.id, output_index: index, content_index: 0, delta: piece.text,
                logprobs: []});
        }
    }
    const result = await handle.done;
    if (response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort") {
        builder.fail(result.error ?? "the request was cancelled");
        events.send({type: "response.failed", response: builder.snapshot()});
        response.end();
        return;
    }
    const calls = builder.finish(result);
    closeReasoning();
    if (messageOpen) {
        const {item, index} = builder.message();
        const part = item.content[0]!;
        events.send({type: "response.output_text.done", item_id: item.id, output_index: index, content_index: 0, text: part.text, logprobs: []});
        events.send({type: "response.content_part.done", item_id: item.id, output_index: index, content_index: 0, part});
        events.send({type: "response.output_item.done", output_index: index, item});
    }
    // Calls arrive whole, after the text: the engine knows a call only once it has ended.
    for (const call of calls) {
        const index = builder.output.indexOf(call);
        events.send({type: "response.output_item.added", output_index: index, item: {...call, arguments: "", status: "in_progress"}});
        events.send({type: "response.function_call_arguments.delta", item_id: call.id, output_index: index, delta: call.arguments});
        events.send({type: "response.function_call_arguments.done", item_id: call.id, output_index: index, name: call.name,
            arguments: call.arguments});
        events.send({type: "response.output_item.done", output_index: index, item: call});
    }
    const final = builder.snapshot();
    events.send({type: final.status === "incomplete" ? "response.incomplete" : "response.completed", response: final});
    response.end();
}
