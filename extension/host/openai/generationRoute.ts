/**
 * `POST /v1/chat/completions` and `POST /v1/completions` on the Engine: one validated request becomes
 * one engine request per choice (queued, scheduled and measured like every other), answered as one JSON body or
 * as a server-sent-event stream. The status line waits until the engine has queued the requests, so a
 * request it refuses (too long for the context, a bad parameter) gets a 400 even when streaming.
 *
 * Completions also take what evaluation harnesses send (lm-evaluation-harness's `local-completions`): token-id
 * prompts, a batch of prompts, and `echo` — each choice's text begins with its prompt's, and with `logprobs` the
 * prompt's tokens come first in the log-probabilities (the first one null), scored by the model; `max_tokens: 0`
 * then scores the prompt alone, as OpenAI's legacy API and vLLM answer it. Both endpoints take vLLM's `prompt_logprobs`
 * (the prompt's tokens scored, keyed by token id, with their ranks) in a whole answer.
 */
import type http from "node:http";
import type {
    ApiFinishReason, ApiPromptLogprobs, ApiToolCall, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Completion,
    CompletionChunk,
    CompletionRequest,
    SamplingParams, StopReason, Usage
} from "../../../protocol/openaiApi.js";
import {ApiRequestError, apiErrorBody} from "../../../protocol/openaiFields.js";
import type {PromptLogprobs, TokenLogprob} from "../../../protocol/engineMessages.js";
import type {EngineClient} from "../engineClient/engineClient.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {GenerationSource} from "../chat/generationInput.js";
import {newToolCallId} from "../chat/toolCallId.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {llamaPromptProgress, llamaTimings, StreamTimings} from "../llamacpp/measures.js";
import {type EngineJob, type GenerationContext, openEventStream, type RefusalFields, refusal, runEngineRequests} from "./engineRequest.js";
import {chatLogprobs, completionLogprobs, vllmPromptLogprobs, withTop} from "./logprobsShapes.js";


type Kind = "chat" | "completions";

/** Serves a chat completion request. */
export async function serveChatCompletion(body: ChatCompletionRequest, context: GenerationContext): Promise<void> {
    const {tools, toolChoice, parallelToolCalls, separateReasoning, allowReasoning, continueFinalMessage} = body;
    const input: GenerationSource = {messages: body.messages, ...tools !== undefined ? {tools} : {},
        ...toolChoice !== undefined ? {toolChoice} : {}, ...parallelToolCalls !== undefined ? {parallelToolCalls} : {},
        ...separateReasoning !== undefined ? {separateReasoning} : {}, ...allowReasoning !== undefined ? {allowReasoning} : {},
        ...continueFinalMessage !== undefined ? {continueFinalMessage} : {}};
    // vLLM's echo: each choice's content begins with the final message's, when it is the answering role's.
    const last = body.messages.at(-1);
    const echo = body.echo === true && last?.role === "assistant" && last.content !== "" ? [last.content] : [];
    await serveGeneration("chat", body, choicesOf(body, input), echo, context);
}

/**
 * Serves a (text) completion request: each prompt (text, token ids; with `suffix`, fill in the middle) with its `n`
 * choices; with `echo`, each choice's text begins with its prompt's (token ids as the model's text).
 */
export async function serveCompletion(body: CompletionRequest, context: GenerationContext): Promise<void> {
    const echoes: string[] = [];
    const jobs: EngineJob[] = [];
    // The prompt is scored for an echo with log-probabilities and for vLLM's prompt_logprobs, with the alternatives both ask for.
    const scoreTop = Math.max(body.echo && body.logprobs !== undefined ? body.logprobs : -1, body.promptLogprobs ?? -1);
    const params: SamplingParams = scoreTop >= 0 ? {...body, promptLogprobs: scoreTop} : body;
    for (const [index, prompt] of body.prompts.entries()) {
        const input: GenerationSource = typeof prompt === "string"
            ? {prompt, ...(body.suffix !== undefined ? {suffix: body.suffix} : {})} : {promptTokens: prompt};
        jobs.push(...choicesOf(params, input));
        if (body.echo)
            echoes.push(typeof prompt === "string" ? prompt : await promptText(prompt, context, index, body.prompts.length));
    }
    await serveGeneration("completions", body, jobs, echoes, context);
}

/** A token prompt's text, for its echo (ids outside the vocabulary are the prompt's error). */
async function promptText(tokens: number[], {client}: GenerationContext, index: number, prompts: number): Promise<string> {
    try {
        return await client.detokenize(tokens);
    } catch (error) {
        if (client.state !== "ready")
            throw new ApiRequestError(`the model is not running: ${errorMessage(error)}`, null, 503, "server_error", "engine_unavailable");
        throw new ApiRequestError(errorMessage(error), prompts > 1 ? `prompt[${index}]` : "prompt", 400);
    }
}

/** `n` choices of one input: one job each; with a seed, choice i samples with seed + i (the same seed would give n equal answers). */
function choicesOf(params: SamplingParams, input: GenerationSource): EngineJob[] {
    return Array.from({length: params.n}, (_, i) =>
        ({input, params: params.seed === undefined || i === 0 ? params : {...params, seed: params.seed + i}}));
}

/** The chat and completions endpoints' names for what an engine refusal is about. */
function fieldsOf(kind: Kind, withSuffix: boolean): RefusalFields {
    return {responseFormat: "response_format", maxTokens: "max_tokens", input: "prompt",
        ...kind === "completions" && withSuffix ? {suffix: "suffix"} : {}};
}

/** `echoes`: with `echo`, each prompt's text (choice i belongs to prompt ⌊i / n⌋); chat: the final message's, for every choice. */
async function serveGeneration(kind: Kind, params: SamplingParams, jobs: readonly EngineJob[], echoes: readonly string[],
                               context: GenerationContext): Promise<void> {
    const {client, response} = context;
    const fields = fieldsOf(kind, jobs[0]?.input.suffix !== undefined);
    await runEngineRequests(context, jobs, fields, async (handles) => {
        const ids: ResponseIds = {
            id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${handles[0]!.id.replaceAll("-", "")}`,
            created: Math.floor(Date.now() / 1000),
            model: context.modelId
        };
        const answer: Answer = {kind, ids, n: params.n, echoes, logprobs: params.logprobs, promptLogprobs: params.promptLogprobs,
            returnTokenIds: params.returnTokenIds === true, returnProgress: params.returnProgress === true,
            timingsPerToken: params.timingsPerToken === true};
        if (params.stream)
            await stream(answer, params.includeUsage, handles, context);
        else
            await respondWhole(answer, await Promise.all(handles.map((handle) => handle.done)), client, fields, response);
    });
}

type ResponseIds = {id: string, created: number, model: string};
/**
 * How the choices are answered: `n` choices per prompt; `echoes`, with `echo`, each prompt's text; `logprobs` and
 * `promptLogprobs`, the alternatives per token the request asked for (SamplingParams).
 */
type Answer = {
    kind: Kind, ids: ResponseIds, n: number, echoes: readonly string[], logprobs: number | undefined, promptLogprobs: number | undefined,
    /** vLLM's `return_token_ids`. */
    returnTokenIds: boolean,
    /** llama.cpp's `return_progress` and `timings_per_token`. */
    returnProgress: boolean,
    timingsPerToken: boolean
};

/**
 * OpenAI's usage, with the prompt tokens the engine found in its prefix cache (as vLLM reports `num_cached_tokens`)
 * and, for an answer whose reasoning was separated, the reasoning's tokens. `n`: choices per prompt.
 */
function usageOf(results: readonly RequestResult[], n: number): Usage {
    // n choices: each prompt counted once (as OpenAI counts it), the completions' tokens summed.
    const firsts = results.filter((_, index) => index % n === 0);
    const promptTokens = firsts.reduce((sum, result) => sum + result.promptTokens, 0);
    const cachedTokens = firsts.reduce((sum, result) => sum + result.cachedTokens, 0);
    const generatedTokens = results.reduce((sum, result) => sum + result.generatedTokens, 0);
    const reasoned = results.filter((result) => result.reasoning !== undefined);
    return {prompt_tokens: promptTokens, completion_tokens: generatedTokens, total_tokens: promptTokens + generatedTokens,
        prompt_tokens_details: {cached_tokens: cachedTokens},
        ...reasoned.length > 0
            ? {completion_tokens_details: {reasoning_tokens: reasoned.reduce((sum, result) => sum + result.reasoning!.tokens, 0)}} : {}};
}

function finishReason(result: RequestResult): ApiFinishReason {
    if (result.toolCalls !== undefined && result.toolCalls.length > 0)
        return "tool_calls";
    return result.reason === "length" ? "length" : "stop";
}

/** The result's tool calls, each with an id of its own (OpenAI's `call_…`). */
function toolCallsOf(result: RequestResult): ApiToolCall[] | undefined {
    return result.toolCalls?.map((call) => ({id: newToolCallId(), type: "function",
        function: {name: call.name, arguments: call.arguments}}));
}

/** `echo`: the text the content begins with (vLLM's chat echo). */
function chatChoice(result: RequestResult, index: number, echo = ""): ChatCompletion["choices"][number] {
    const logprobs = result.logprobs;
    const toolCalls = toolCallsOf(result);
    const text = echo + result.text;
    // With tool calls and no text, `content` is null, as OpenAI answers.
    const reasoning = result.reasoning !== undefined && result.reasoning.text !== "" ? {reasoning_content: result.reasoning.text} : {};
    const message: ChatCompletion["choices"][0]["message"] = toolCalls !== undefined
        ? {role: "assistant", content: text === "" ? null : text, ...reasoning, tool_calls: toolCalls}
        : {role: "assistant", content: text, ...reasoning};
    return {index, message, finish_reason: finishReason(result), logprobs: logprobs !== undefined ? chatLogprobs(logprobs) : null,
        stop_reason: stopReason(result)};
}

/** vLLM's `stop_reason`: the stop string or stop token id that ended the choice, else null. */
function stopReason(result: RequestResult): StopReason {
    return result.stopString ?? result.stopTokenId ?? null;
}

async function respondWhole({kind, ids, n, echoes, logprobs, promptLogprobs, returnTokenIds}: Answer, results: readonly RequestResult[],
                            client: EngineClient, fields: RefusalFields, response: http.ServerResponse): Promise<void> {
    if (results.some((result) => result.reason === "abort") && response.destroyed)
        return;
    const failed = results.find((result) => result.reason === "error" || result.reason === "abort");
    if (failed !== undefined)
        throw refusal(failed, client, fields);
    // vLLM's prompt_logprobs: a chat answer's once (every choice has the same prompt), each completion choice its prompt's.
    const scored = (result: RequestResult | undefined): {prompt_logprobs?: ApiPromptLogprobs} =>
        promptLogprobs !== undefined && result?.promptLogprobs !== undefined
            ? {prompt_logprobs: vllmPromptLogprobs(result.promptLogprobs, promptLogprobs)} : {};
    // vLLM's return_token_ids: a chat answer's prompt ids once, each completion choice its prompt's; every choice its output's.
    const outputIds = (result: RequestResult): {token_ids?: number[]} => returnTokenIds ? {token_ids: result.tokenIds ?? []} : {};
    const promptIds = (result: RequestResult | undefined): {prompt_token_ids?: number[]} =>
        returnTokenIds && result?.promptTokenIds !== undefined ? {prompt_token_ids: result.promptTokenIds} : {};
    // One choice of one prompt: the request's timings, as llama-server's.
    const measures = results.length === 1 ? {timings: llamaTimings(results[0]!)} : {};
    const body: ChatCompletion | Completion = kind === "chat"
        ? {...ids, object: "chat.completion", ...scored(results[0]), ...promptIds(results[0]), usage: usageOf(results, n), ...measures,
            choices: results.map((result, index) => ({...chatChoice(result, index, echoes[0]), ...outputIds(result)}))}
        : {...ids, object: "text_completion", usage: usageOf(results, n), ...measures,
            choices: results.map((result, index) => {
                const echo: string | undefined = echoes[Math.floor(index / n)];
                const echoScores = echo !== undefined && logprobs !== undefined && result.promptLogprobs !== undefined
                    ? withTop(result.promptLogprobs, logprobs) : undefined;
                return {index, text: (echo ?? "") + result.text, finish_reason: finishReason(result), stop_reason: stopReason(result),
                    logprobs: result.logprobs !== undefined || echoScores !== undefined
                        ? completionLogprobs(result.logprobs ?? [], 0, echoScores) : null, ...scored(result), ...promptIds(result),
                    ...outputIds(result)};
            })};
    const text = JSON.stringify(body);
    response.writeHead(200, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
    await Promise.resolve();
}

/** `logprobs`: the chunk's tokens' log-probabilities, with `offset` (completions) their first one's place in the text. */
function chunk(kind: Kind, ids: ResponseIds, index: number, text: string | undefined, reason: ApiFinishReason | null,
               role = false, logprobs?: {entries: readonly TokenLogprob[], offset: number}): ChatCompletionChunk | CompletionChunk {
    if (kind === "chat") {
        type Delta = ChatCompletionChunk["choices"][number]["delta"];
        const delta: Delta = role ? {role: "assistant", content: ""} : text === undefined ? {} : {content: text};
        return {...ids, object: "chat.completion.chunk",
            choices: [{index, delta, finish_reason: reason, logprobs: logprobs !== undefined ? chatLogprobs(logprobs.entries) : null}]};
    }
    return {...ids, object: "text_completion", choices: [{index, text: text ?? "", finish_reason: reason,
        logprobs: logprobs !== undefined ? completionLogprobs(logprobs.entries, logprobs.offset) : null}]};
}

function reasoningChunk(ids: ResponseIds, index: number, reasoning: string, logprobs: {entries: readonly TokenLogprob[]} | undefined
): ChatCompletionChunk {
    return {...ids, object: "chat.completion.chunk", choices: [{index, delta: {reasoning_content: reasoning}, finish_reason: null,
        logprobs: logprobs !== undefined ? chatLogprobs(logprobs.entries) : null}]};
}

/**
 * Streams the choices (one handle each), their chunks interleaved as they come, each marked with its choice's index;
 * with `echo`, a choice's first chunk is its prompt (with the prompt's log-probabilities when scored).
 */
async function stream({kind, ids, n, echoes, returnTokenIds, returnProgress, timingsPerToken}: Answer, includeUsage: boolean,
                      handles: readonly RequestHandle[], context: GenerationContext): Promise<void> {
    const {response} = context;
    const openSend = openEventStream(context);
    const choice = async (handle: RequestHandle, index: number): Promise<RequestResult> => {
        // vLLM's return_token_ids: the prompt's ids in the choice's first chunk, each chunk the ids of the tokens since the last one
        // (a token whose text is held back goes with the next chunk sent).
        let promptIds = returnTokenIds ? handle.promptTokenIds ?? [] : undefined;
        let pendingIds: number[] = [];
        // llama.cpp's timings_per_token: every chunk of the choice with its request's timings so far.
        const timings = timingsPerToken ? new StreamTimings(handle.lifecycle) : undefined;
        const measured = (event: ChatCompletionChunk | CompletionChunk): ChatCompletionChunk | CompletionChunk =>
            timings !== undefined ? {...event, timings: timings.now()} : event;
        const send = (event: ChatCompletionChunk | CompletionChunk): void => {
            event = measured(event);
            if (returnTokenIds && event.choices.length === 1) {
                const first = event.choices[0]!;
                if (kind === "chat" && promptIds !== undefined)
                    (event as ChatCompletionChunk).prompt_token_ids = promptIds;
                else if (kind === "completions" && promptIds !== undefined)
                    (first as CompletionChunk["choices"][number]).prompt_token_ids = promptIds;
                promptIds = undefined;
                first.token_ids = pendingIds;
                pendingIds = [];
            }
            openSend(event);
        };
        if (kind === "chat")
            send(chunk(kind, ids, index, undefined, null, true));
        // llama.cpp's prompt progress: a chunk without text each time (a chat's repeats the role, as llama-server's).
        if (returnProgress)
            handle.onPromptProgress((progress) => openSend({...measured(chunk(kind, ids, index, kind === "chat" ? undefined : "", null,
                kind === "chat")), ...llamaPromptProgress(progress)}));
        let offset = 0;
        let echo: string | undefined = echoes[Math.floor(index / n)];
        // The prompt is scored before the first token, so its scores are there when the first piece (or the end) is.
        const sendEcho = (): void => {
            if (echo === undefined)
                return;
            if (kind === "chat") {
                send(chunk(kind, ids, index, echo, null));
                echo = undefined;
                return;
            }
            const scores = handle.promptLogprobs;
            send({...ids, object: "text_completion", choices: [{index, text: echo, finish_reason: null,
                logprobs: scores !== undefined ? completionLogprobs([], 0, scores) : null}]} satisfies CompletionChunk);
            offset += promptLength(scores);
            echo = undefined;
        };
        for await (const piece of handle) {
            timings?.add(piece);
            sendEcho();
            if (piece.ids !== undefined)
                pendingIds.push(...piece.ids);
            // A token whose text is still held back (an incomplete character, a possible stop string) still has its log-probability.
            const logprobs = piece.logprobs !== undefined && piece.logprobs.length > 0 ? {entries: piece.logprobs, offset} : undefined;
            // Reasoning streams as llama.cpp's server streams it: `reasoning_content` deltas, before the content that follows it.
            if (kind === "chat" && piece.reasoning !== undefined && piece.reasoning !== "")
                send(reasoningChunk(ids, index, piece.reasoning, piece.text === "" ? logprobs : undefined));
            if (piece.text !== "" || (logprobs !== undefined && (piece.reasoning ?? "") === "") || pendingIds.length > 0)
                send(chunk(kind, ids, index, piece.text, null, false, logprobs));
            for (const entry of piece.logprobs ?? [])
                offset += entry.token.length;
        }
        const result = await handle.done;
        if (response.destroyed || result.reason === "error" || result.reason === "abort")
            return result;
        sendEcho();
        // Tool calls arrive whole, after the text: the engine knows a call only once it has ended.
        const toolCalls = toolCallsOf(result);
        if (kind === "chat" && toolCalls !== undefined)
            send({...ids, object: "chat.completion.chunk", choices: [{index, finish_reason: null, logprobs: null,
                delta: {tool_calls: toolCalls.map((call, callIndex) => ({index: callIndex, ...call}))}}]} satisfies ChatCompletionChunk);
        const last = chunk(kind, ids, index, kind === "chat" ? undefined : "", finishReason(result));
        last.choices[0]!.stop_reason = stopReason(result);
        // One choice of one prompt: its last chunk has the request's timings, as llama-server's (unless the usage chunk follows).
        send(handles.length === 1 && !includeUsage ? {...last, timings: llamaTimings(result)} : last);
        return result;
    };
    const results = await Promise.all(handles.map(choice));
    if (response.destroyed)
        return;
    const failed = results.find((result) => result.reason === "error" || result.reason === "abort");
    if (failed !== undefined) {
        const message = failed.error ?? "the request was cancelled";
        const code = failed.reason === "abort" ? "cancelled" : "engine_error";
        openSend(apiErrorBody(new ApiRequestError(message, null, 500, "server_error", code)));
    } else if (includeUsage)
        openSend({...ids, object: kind === "chat" ? "chat.completion.chunk" : "text_completion", choices: [], usage: usageOf(results, n),
            ...results.length === 1 ? {timings: llamaTimings(results[0]!)} : {}});
    response.end("data: [DONE]\n\n");
}

/** The text length of a scored prompt's tokens (where the first generated token's offset starts after an echo). */
function promptLength(scores: PromptLogprobs | undefined): number {
    return scores === undefined ? 0 : scores.logprobs.reduce((sum, entry) => sum + entry.token.length, scores.first.length);
}
