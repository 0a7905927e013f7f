/**
 * `POST /api/chat` and `POST /api/generate` (Ollama's native API) on the Engine: one validated request becomes one
 * engine request, queued, scheduled and measured like every other, answered as NDJSON lines (Ollama's default) or one
 * JSON object. The final line carries Ollama's counts and durations, taken from the request's measured lifecycle:
 * `prompt_eval_duration` = scheduled → first token (prefill), `eval_duration` = first → last token (decode),
 * `total_duration` = arrival → finish delivered, `load_duration` 0 (the model stays loaded).
 */
import type {TokenLogprob} from "../../../protocol/engineMessages.js";
import type {
    OllamaChatChunk, OllamaDoneFields, OllamaGenerateChunk, OllamaLogprob, OllamaRequest, OllamaToolCall
} from "../../../protocol/ollamaApi.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {GenerationSource} from "../chat/generationInput.js";
import {type GenerationContext, type RefusalFields, refusal, runEngineRequest} from "../openai/engineRequest.js";
import {ApiRequestError} from "../../../protocol/openaiFields.js";

type Kind = "chat" | "generate";

const fields = (withSuffix: boolean): RefusalFields => ({responseFormat: "format", maxTokens: "options.num_predict",
    ...withSuffix ? {suffix: "suffix"} : {}});

const nanoseconds = (ms: number): number => Math.max(0, Math.round(ms * 1e6));

/** What the engine generates from: the conversation, the raw prompt (FIM with a suffix), or a templated prompt. */
function sourceOf(body: OllamaRequest, hasChatTemplate: boolean): GenerationSource {
    const {templated, allowReasoning} = body;
    const reasoning = allowReasoning !== undefined ? {allowReasoning} : {};
    if (templated !== undefined)
        return hasChatTemplate
            ? {messages: [...templated.system !== "" ? [{role: "system" as const, content: templated.system}] : [], {role: "user", content: templated.prompt}],
                ...reasoning}
            : {prompt: templated.system !== "" ? `${templated.system}\n\n${templated.prompt}` : templated.prompt};
    if (body.messages !== undefined)
        return {messages: body.messages, ...body.tools !== undefined ? {tools: body.tools} : {}, ...reasoning,
            ...body.continueFinalMessage === true ? {continueFinalMessage: true} : {}};
    return {prompt: body.prompt ?? "", ...body.suffix !== undefined ? {suffix: body.suffix} : {}};
}

export async function serveOllama(kind: Kind, body: OllamaRequest, context: GenerationContext): Promise<void> {
    // As Ollama answers it: reasoning asked of a model whose template has none is a request error, not ignored.
    if (body.thinkAskedFor === true && context.info.model.reasoning !== true)
        throw new ApiRequestError(`${JSON.stringify(body.model)} does not support thinking`, "think", 400);
    if (body.loadOnly)
        return loaded(kind, body.model, context);
    const input = sourceOf(body, context.info.model.toolCalling === true);
    const {temperature, topP, topK, minP, seed, penalties, responseFormat, logprobs, stop, maxTokens} = body;
    const params = {maxTokens, clampToContext: true, temperature, topP, topK, minP, seed, penalties, responseFormat, logprobs, stop};
    const refusalFields = fields(input.suffix !== undefined);
    await runEngineRequest(context, input, params, refusalFields, async (handle) => {
        if (body.stream)
            await stream(kind, body.model, handle, context, refusalFields);
        else
            await respondWhole(kind, body.model, handle, context, refusalFields);
    });
}

/** Ollama's answer to a request with nothing to generate: it loads the model (here: it is loaded) and says so. */
function loaded(kind: Kind, model: string, {response}: GenerationContext): void {
    const done: OllamaDoneFields = {done: true, done_reason: "load", total_duration: 0, load_duration: 0, prompt_eval_count: 0,
        prompt_eval_duration: 0, eval_count: 0, eval_duration: 0};
    const created_at = new Date().toISOString();
    const chunk: OllamaChatChunk | OllamaGenerateChunk = kind === "chat"
        ? {model, created_at, message: {role: "assistant", content: ""}, ...done} : {model, created_at, response: "", ...done};
    const text = JSON.stringify(chunk);
    response.writeHead(200, {"Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

function doneFields(result: RequestResult): OllamaDoneFields {
    const {arrival, lastDelivered, scheduled, firstToken, lastToken} = result;
    return {
        done: true, done_reason: result.reason === "length" ? "length" : "stop",
        total_duration: nanoseconds(lastDelivered - arrival), load_duration: 0,
        prompt_eval_count: result.promptTokens,
        prompt_eval_duration: scheduled !== undefined && firstToken !== undefined ? nanoseconds(firstToken - scheduled) : 0,
        eval_count: result.generatedTokens,
        eval_duration: firstToken !== undefined && lastToken !== undefined ? nanoseconds(lastToken - firstToken) : 0
    };
}

function logprobsOf(logprobs: readonly TokenLogprob[]): OllamaLogprob[] {
    return logprobs.map(({token, logprob, top}) => ({token, logprob,
        ...top.length > 0 ? {top_logprobs: top.map((other) => ({token: other.token, logprob: other.logprob}))} : {}}));
}

/** The result's tool calls with their arguments as objects (the engine's calls carry JSON text of an object). */
function toolCallsOf(result: RequestResult): OllamaToolCall[] | undefined {
    const calls = result.toolCalls ?? [];
    return calls.length === 0 ? undefined
        : calls.map((call, index) => ({function: {index, name: call.name, arguments: JSON.parse(call.arguments) as unknown}}));
}

type Piece = {
    text: string, reasoning?: string | undefined, logprobs?: readonly TokenLogprob[] | undefined, toolCalls?: OllamaToolCall[] | undefined
};

function chunkOf(kind: Kind, model: string, piece: Piece, done: {done: false} | OllamaDoneFields): OllamaChatChunk | OllamaGenerateChunk {
    const created_at = new Date().toISOString();
    const thinking = piece.reasoning !== undefined && piece.reasoning !== "" ? {thinking: piece.reasoning} : {};
    const logprobs = piece.logprobs !== undefined && piece.logprobs.length > 0 ? {logprobs: logprobsOf(piece.logprobs)} : {};
    if (kind === "generate")
        return {model, created_at, response: piece.text, ...thinking, ...logprobs, ...done};
    return {model, created_at, message: {role: "assistant", content: piece.text, ...thinking,
        ...piece.toolCalls !== undefined ? {tool_calls: piece.toolCalls} : {}}, ...logprobs, ...done};
}

async function respondWhole(kind: Kind, model: string, handle: RequestHandle, {client, response}: GenerationContext,
                            refusalFields: RefusalFields): Promise<void> {
    const result = await handle.done;
    if (result.reason === "abort" && response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort")
        throw refusal(result, client, refusalFields);
    const text = JSON.stringify(chunkOf(kind, model, {text: result.text, reasoning: result.reasoning?.text, logprobs: result.logprobs,
        toolCalls: toolCallsOf(result)}, doneFields(result)));
    response.writeHead(200, {"Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

async function stream(kind: Kind, model: string, handle: RequestHandle, {client, response}: GenerationContext,
                      refusalFields: RefusalFields): Promise<void> {
    response.writeHead(200, {"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"});
    response.flushHeaders();
    const send = (line: unknown): void => {
        if (!response.destroyed)
            response.write(`${JSON.stringify(line)}\n`);
    };
    for await (const piece of handle)
        if (piece.text !== "" || (piece.reasoning ?? "") !== "" || (piece.logprobs ?? []).length > 0)
            send(chunkOf(kind, model, piece, {done: false}));
    const result = await handle.done;
    if (response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort") {
        // Ollama ends a stream that fails midway with an error line (its clients throw it).
        send({error: refusal(result, client, refusalFields).message});
        response.end();
        return;
    }
    // Calls arrive whole, after the text (the engine knows a call only once it has ended), on a line of their own as Ollama's.
    const toolCalls = toolCallsOf(result);
    if (toolCalls !== undefined)
        send(chunkOf(kind, model, {text: "", toolCalls}, {done: false}));
    send(chunkOf(kind, model, {text: ""}, doneFields(result)));
    response.end();
}
