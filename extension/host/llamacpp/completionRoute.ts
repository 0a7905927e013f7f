/**
 * `POST /completion` and `POST /infill` (llama.cpp's server's own API) on the Engine: one validated request becomes one
 * engine request, queued, scheduled and measured like every other, answered in llama-server's shape as one JSON
 * object or a server-sent-event stream (`data: {…}` per piece, the last one with `stop: true` and the totals). The
 * `timings` come from the request's measured lifecycle: prompt = scheduled → first token, over the prompt tokens the
 * prefix cache did not hold; predicted = first → last token.
 */
import type {TokenLogprob} from "../../../protocol/engineMessages.js";
import type {LlamaTimings} from "../../../protocol/llamaCppMeasures.js";
import type {
    LlamaCompletionAnswer, LlamaCompletionChunk, LlamaCompletionProbability, LlamaCompletionRequest, LlamaStopType,
    LlamaTokenProbability
} from "../../../protocol/llamaCppApi.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {GenerationSource} from "../chat/generationInput.js";
import {type GenerationContext, openEventStream, type RefusalFields, refusal, runEngineRequest} from "../openai/engineRequest.js";
import {utf8} from "../openai/logprobsShapes.js";
import {llamaPromptProgress, llamaTimings, StreamTimings} from "./measures.js";

const fields: RefusalFields = {responseFormat: "json_schema", maxTokens: "n_predict", suffix: "input_suffix", input: "prompt"};

/**
 * llama-server names the slot that runs a request in its answer and in every streamed piece; this server names the
 * sequence (`GET /slots` lists them, `id_slot` in a request picks one), 0 before the request is scheduled.
 */
function slotOf(handle: RequestHandle): number {
    return handle.lifecycle.sequence ?? 0;
}

function sourceOf(body: LlamaCompletionRequest): GenerationSource {
    if (body.infill !== undefined)
        return {prompt: body.infill.prefix, suffix: body.infill.suffix, infill: body.infill.context};
    return typeof body.prompt === "string" ? {prompt: body.prompt} : {promptTokens: body.prompt ?? []};
}

export async function serveLlamaCompletion(body: LlamaCompletionRequest, context: GenerationContext): Promise<void> {
    const {maxTokens, temperature, topK, topP, minP, seed, penalties, logitBias, textBias, responseFormat, stop, ignoreEos} = body;
    const params = {maxTokens, clampToContext: true, temperature, topK, topP, minP, seed, penalties, logitBias, textBias, responseFormat,
        stop, ignoreEos, cachePrompt: body.cachePrompt, slot: body.slot, dry: body.dry, xtc: body.xtc, minIndent: body.minIndent,
        maxGenerationMs: body.maxGenerationMs, logprobs: body.probs,
        // llama-server's streamed pieces always carry their token ids; a whole answer with `return_tokens`.
        returnTokenIds: body.stream || body.returnTokens === true};
    await runEngineRequest(context, sourceOf(body), params, fields, async (handle) => {
        if (body.stream)
            await stream(body, handle, context);
        else
            await respondWhole(body, handle, context);
    });
}

function stopTypeOf(result: RequestResult): LlamaStopType {
    if (result.reason === "length")
        return "limit";
    return result.stopString !== undefined ? "word" : "eos";
}

/**
 * llama-server's `completion_probabilities` for generated tokens' log-probabilities (TokenLogprob, which carry their
 * token ids): `logprob` and `top_logprobs`, or with `post_sampling_probs` `prob` and `top_probs`.
 */
function completionProbabilities(body: LlamaCompletionRequest, logprobs: readonly TokenLogprob[]): LlamaCompletionProbability[] {
    const entry = (token: string, logprob: number, id: number | undefined): LlamaTokenProbability =>
        ({id: id ?? -1, token, bytes: utf8(token), ...body.postSamplingProbs === true ? {prob: Math.exp(logprob)} : {logprob}});
    return logprobs.map((generated) => {
        const top = generated.top.map((other) => entry(other.token, other.logprob, other.id));
        return {...entry(generated.token, generated.logprob, generated.id),
            ...body.postSamplingProbs === true ? {top_probs: top} : {top_logprobs: top}};
    });
}

/** The `completion_probabilities` field when the request asked for them (`n_probs`). */
type ProbabilitiesField = {completion_probabilities?: LlamaCompletionProbability[]};
function probabilitiesField(body: LlamaCompletionRequest, logprobs: readonly TokenLogprob[] | undefined): ProbabilitiesField {
    return body.probs !== undefined && logprobs !== undefined ? {completion_probabilities: completionProbabilities(body, logprobs)} : {};
}

function answerOf(body: LlamaCompletionRequest, result: RequestResult, content: string, model: string,
                  logprobs?: readonly TokenLogprob[]): LlamaCompletionAnswer {
    return {
        // A stream's last event has no tokens: they went in the pieces, as llama-server's.
        index: 0, content, tokens: body.stream ? [] : result.tokenIds ?? [], id_slot: result.sequence ?? 0, stop: true, model,
        tokens_predicted: result.generatedTokens, tokens_evaluated: result.promptTokens,
        generation_settings: {n_predict: body.maxTokens ?? -1, ...body.temperature !== undefined ? {temperature: body.temperature} : {},
            ...body.topK !== undefined ? {top_k: body.topK} : {}, ...body.topP !== undefined ? {top_p: body.topP} : {},
            ...body.minP !== undefined ? {min_p: body.minP} : {}, ...body.seed !== undefined ? {seed: body.seed} : {},
            stop: body.stop, ignore_eos: body.ignoreEos, n_indent: body.minIndent ?? 0, t_max_predict_ms: body.maxGenerationMs ?? -1},
        prompt: body.infill !== undefined ? body.infill.prefix + body.infill.context.cursorLine
            : typeof body.prompt === "string" ? body.prompt : "",
        has_new_line: result.text.includes("\n"), truncated: false, stop_type: stopTypeOf(result), stopping_word: result.stopString ?? "",
        // What the sequence's KV cache holds after it: every token but the last one sampled (or the prompt's last, when none was).
        tokens_cached: Math.max(0, result.promptTokens + result.generatedTokens - 1), timings: llamaTimings(result),
        ...probabilitiesField(body, logprobs)
    };
}

async function respondWhole(body: LlamaCompletionRequest, handle: RequestHandle,
                            {client, response, modelId}: GenerationContext): Promise<void> {
    const result = await handle.done;
    if (result.reason === "abort" && response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort")
        throw refusal(result, client, fields);
    const text = JSON.stringify(answerOf(body, result, result.text, modelId, result.logprobs));
    response.writeHead(200, {"Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

async function stream(body: LlamaCompletionRequest, handle: RequestHandle, context: GenerationContext): Promise<void> {
    const {client, response, modelId} = context;
    const send = openEventStream(context);
    let predicted = 0;
    const promptTokens = handle.promptTokens ?? 0;
    // timings_per_token: every piece with the request's timings so far.
    const timings = body.timingsPerToken === true ? new StreamTimings(handle.lifecycle) : undefined;
    const measured = (): {timings?: LlamaTimings} => timings !== undefined ? {timings: timings.now()} : {};
    if (body.returnProgress === true)
        handle.onPromptProgress((progress) => send({index: 0, content: "", tokens: [], stop: false, id_slot: slotOf(handle), tokens_predicted: 0,
            tokens_evaluated: progress.total, ...measured(), ...llamaPromptProgress(progress)} satisfies LlamaCompletionChunk));
    // Ids of tokens whose text is held back (an incomplete character, a possible stop string) go with the next piece sent.
    let pendingIds: number[] = [];
    for await (const piece of handle) {
        timings?.add(piece);
        predicted += piece.tokens;
        pendingIds.push(...piece.ids ?? []);
        if (piece.text !== "" || (body.probs !== undefined && piece.logprobs !== undefined)) {
            send({index: 0, content: piece.text, tokens: pendingIds, stop: false, id_slot: slotOf(handle), tokens_predicted: predicted,
                tokens_evaluated: promptTokens, ...measured(), ...probabilitiesField(body, piece.logprobs)} satisfies LlamaCompletionChunk);
            pendingIds = [];
        }
    }
    const result = await handle.done;
    if (response.destroyed)
        return;
    if (result.reason === "error" || result.reason === "abort") {
        // llama-server ends a stream that fails midway with an error event.
        const error = refusal(result, client, fields);
        send({error: {code: error.status, message: error.message, type: error.type}});
    } else
        // The last event carries the totals, its content empty (the text went in the pieces), as llama-server's.
        send({...answerOf(body, result, "", modelId), tokens: pendingIds});
    response.end();
}
