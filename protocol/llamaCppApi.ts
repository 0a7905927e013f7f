/**
 * llama.cpp's server's own completion API, `POST /completion` and `POST /infill` (what llama.vscode, the ggml-org VS
 * Code extension, sends for code completion, and what scripts written against llama-server send): the request bodies
 * this server accepts, validated on arrival, and the answers in llama-server's shape (`content`, `stop`, `stop_type`,
 * `tokens_predicted`, `tokens_evaluated`, `tokens_cached`, `timings`).
 *
 * Honoured: `prompt` (text, or token ids for `/completion`), `input_prefix`, `input_suffix`, `input_extra` (`/infill`),
 * `n_predict` (−1: what the context leaves; 0: the prompt is only evaluated, into the prefix cache), `temperature`,
 * `top_k`, `top_p`, `min_p`, `seed` (−1: random), `stop`, `stream`, `ignore_eos`, the penalties (`repeat_penalty`,
 * `repeat_last_n`, `presence_penalty`, `frequency_penalty`), `logit_bias` (an object of token ids), `json_schema`,
 * `grammar` (GBNF; and vLLM's `structured_outputs`: grammarFields.ts), `n_indent`, `t_max_predict_ms`, `id_slot` (the
 * sequence to run on: parseIdSlot), and the DRY and XTC samplers (`dry_*`, `xtc_*`: llamaCppSamplers.ts). `lora` is
 * checked against the server's adapters before the body is read here (loraAdapters.ts). Settings of llama-server's
 * own machinery (`samplers`, `t_max_prompt_ms`) are ignored; samplers node-llama-cpp lacks
 * (`typical_p`, `mirostat`, …) too, said once (ignoredSamplingFields.ts). `return_tokens` fills a whole answer's
 * `tokens` with the generated ids (a stream's pieces carry theirs always, as llama-server's). `return_progress` streams
 * the prompt's evaluation before the first token, `timings_per_token` the request's `timings` in every piece
 * (llamaCppMeasures.ts); `cache_prompt: false` reuses no cached prefix. `n_probs` (at most 20) and
 * `post_sampling_probs` give each generated token's `completion_probabilities`: the distribution it was sampled from,
 * as the OpenAI endpoints' log-probabilities.
 */
import {maxStopLength, maxStopStrings, maxInfillChunks, maxTopLogprobs, type InfillContext, type ResponseFormat, type SamplingPenalties,
    type LogitBias, type TextBias, type DryPenalty, type ExcludeTopChoices} from "./engineMessages.js";
import {parseLlamaCppLogitBias} from "./llamaCppLogitBias.js";
import {parseLlamaCppSamplers} from "./llamaCppSamplers.js";
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField, optionalStringField, tokenIdsField} from "./openaiFields.js";
import {parseGrammarConstraint} from "./grammarFields.js";
import type {StreamChunkContent} from "./openaiApi.js";
import {parsePenalties, schemaFormat} from "./openaiSampling.js";
import type {LlamaMeasureFields, LlamaTimings} from "./llamaCppMeasures.js";
import {isObject, type JsonObject} from "./validation.js";

export type LlamaCompletionKind = "completion" | "infill";

/** A validated `/completion` or `/infill` body, in the engine's terms. */
export type LlamaCompletionRequest = {
    kind: LlamaCompletionKind,
    /** `/completion`'s prompt: text (BOS and special tokens as a completion's) or token ids (as given). */
    prompt?: string | number[],
    /** `/infill`'s code before and after the cursor, and the rest. */
    infill?: {prefix: string, suffix: string, context: InfillContext},
    /** `n_predict`: undefined for −1 (what the context leaves). */
    maxTokens: number | undefined,
    temperature?: number, topK?: number, topP?: number, minP?: number, seed?: number,
    penalties?: SamplingPenalties, logitBias?: LogitBias[], textBias?: TextBias[], responseFormat?: ResponseFormat,
    dry?: DryPenalty, xtc?: ExcludeTopChoices,
    stop: string[],
    stream: boolean,
    ignoreEos: boolean,
    minIndent?: number,
    maxGenerationMs?: number,
    /** `return_tokens`: a whole answer's `tokens` are the generated token ids (a stream's pieces always carry theirs). */
    returnTokens?: boolean,
    /** `return_progress`: a stream reports the prompt's evaluation before the first token (llamaCppMeasures.ts). */
    returnProgress?: boolean,
    /** `timings_per_token`: every streamed piece carries the request's `timings` so far (llamaCppMeasures.ts). */
    timingsPerToken?: boolean,
    /** `cache_prompt: false`: reuse no cached prefix; the whole prompt is evaluated. */
    cachePrompt?: boolean,
    /** `id_slot` (parseIdSlot). */
    slot?: number,
    /** `n_probs`: each generated token's probability and this many most likely alternatives (absent: none). */
    probs?: number,
    /** `post_sampling_probs`: probabilities (`prob`, `top_probs`) instead of log-probabilities (`logprob`, `top_logprobs`). */
    postSamplingProbs?: boolean
};

/** One alternative in `completion_probabilities`: llama-server's `logprob`, or `prob` with `post_sampling_probs`. */
export type LlamaTokenProbability = {id: number, token: string, bytes: number[], logprob?: number, prob?: number};
/** One generated token's entry in `completion_probabilities`, with its alternatives (`top_logprobs`, or `top_probs`). */
export type LlamaCompletionProbability = LlamaTokenProbability &
    {top_logprobs?: LlamaTokenProbability[], top_probs?: LlamaTokenProbability[]};

/** llama-server's `stop_type`: an end-of-generation token, a stop word, a limit (`n_predict`, `n_indent`, time). */
export type LlamaStopType = "eos" | "word" | "limit" | "none";

/** One streamed piece (with `return_progress`, before the first token: `prompt_progress` and no content). */
export type LlamaCompletionChunk = LlamaMeasureFields & {
    index: 0, content: string, tokens: number[], stop: false, id_slot: number, tokens_predicted: number, tokens_evaluated: number,
    completion_probabilities?: LlamaCompletionProbability[]
};

/** The whole answer, or a stream's last event. */
export type LlamaCompletionAnswer = {
    index: 0, content: string, tokens: number[], id_slot: number, stop: true, model: string,
    tokens_predicted: number, tokens_evaluated: number,
    generation_settings: {n_predict: number, temperature?: number, top_k?: number, top_p?: number, min_p?: number, seed?: number,
        stop: string[], ignore_eos: boolean, n_indent: number, t_max_predict_ms: number},
    prompt: string, has_new_line: boolean, truncated: boolean, stop_type: LlamaStopType, stopping_word: string,
    tokens_cached: number, timings: LlamaTimings,
    completion_probabilities?: LlamaCompletionProbability[]
};

function parseStop(value: unknown): string[] {
    if (value === undefined || value === null)
        return [];
    if (!Array.isArray(value))
        fail("stop", "expected an array of strings");
    if (value.length > maxStopStrings)
        fail("stop", `at most ${maxStopStrings} stop strings`);
    // llama-server skips empty stop words; so does this server.
    return value.filter((item) => item !== "").map((item: unknown, index) => {
        if (typeof item !== "string" || item.length > maxStopLength)
            fail(`stop[${index}]`, `expected a string of at most ${maxStopLength} characters`);
        return item;
    });
}

function parsePrompt(value: unknown): string | number[] {
    if (typeof value === "string")
        return value;
    if (!Array.isArray(value))
        fail("prompt", "expected a string or an array of token ids");
    return tokenIdsField(value, "prompt");
}

function parseExtra(value: unknown): InfillContext["extra"] {
    if (value === undefined || value === null)
        return [];
    if (!Array.isArray(value) || value.length > maxInfillChunks)
        fail("input_extra", `expected an array of at most ${maxInfillChunks} {"filename": string, "text": string} chunks`);
    return value.map((chunk: unknown, index) => {
        if (!isObject(chunk) || typeof chunk.text !== "string")
            fail(`input_extra[${index}].text`, "expected a string");
        if (chunk.filename !== undefined && typeof chunk.filename !== "string")
            fail(`input_extra[${index}].filename`, "expected a string");
        // llama-server's name for a chunk without one.
        return {filename: chunk.filename ?? "tmp", text: chunk.text};
    });
}

/**
 * llama-server's `id_slot` (on every completion route): the slot to run on, as an index that wraps around the slots
 * (llama-server's rule: 5 on 4 slots is slot 1); −1, or any negative, lets the server choose. Undefined: not given, or
 * negative.
 */
export function parseIdSlot(body: JsonObject): number | undefined {
    const slot = optionalNumberField(body, "id_slot", -(2 ** 31), 2 ** 31 - 1, true);
    return slot !== undefined && slot >= 0 ? slot : undefined;
}

/** Validates a `/completion` or `/infill` body; throws ApiRequestError naming the field. */
export function parseLlamaCompletionRequest(value: unknown, kind: LlamaCompletionKind): LlamaCompletionRequest {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    const body = value;
    const nProbs = optionalNumberField(body, "n_probs", 0, 1e6, true);
    if (nProbs !== undefined && nProbs > maxTopLogprobs)
        fail("n_probs", `at most ${maxTopLogprobs} alternatives per token here (vLLM's bound for logprobs), got ${nProbs}`);
    const nPredict = optionalNumberField(body, "n_predict", -1, 1e9, true) ?? optionalNumberField(body, "max_tokens", -1, 1e9, true);
    const request: LlamaCompletionRequest = {kind, maxTokens: nPredict === undefined || nPredict < 0 ? undefined : nPredict,
        stop: parseStop(body.stop), stream: optionalBooleanField(body, "stream") ?? false, ignoreEos: optionalBooleanField(body, "ignore_eos") ?? false};
    if (kind === "infill") {
        const prefix = optionalStringField(body, "input_prefix");
        const suffix = optionalStringField(body, "input_suffix");
        if (prefix === undefined)
            fail("input_prefix", "required (a string)");
        if (suffix === undefined)
            fail("input_suffix", "required (a string)");
        request.infill = {prefix, suffix, context: {cursorLine: optionalStringField(body, "prompt") ?? "", extra: parseExtra(body.input_extra),
            reserveTokens: nPredict === undefined || nPredict < 0 ? 0 : nPredict}};
    } else {
        if (body.prompt === undefined)
            fail("prompt", "required");
        request.prompt = parsePrompt(body.prompt);
    }
    const temperature = optionalNumberField(body, "temperature", -1e6, 1e6, false);
    // llama-server samples greedily at a temperature ≤ 0.
    if (temperature !== undefined) request.temperature = Math.max(0, temperature);
    const topK = optionalNumberField(body, "top_k", -1e9, 1e9, true);
    if (topK !== undefined) request.topK = Math.max(0, topK);
    const topP = optionalNumberField(body, "top_p", 0, 1, false);
    if (topP !== undefined && topP > 0) request.topP = topP;
    const minP = optionalNumberField(body, "min_p", 0, 1, false);
    if (minP !== undefined) request.minP = minP;
    const seed = optionalNumberField(body, "seed", -1, 2 ** 32, true);
    if (seed !== undefined && seed >= 0) request.seed = seed;
    const penalties = parsePenalties(body);
    if (penalties !== undefined) request.penalties = penalties;
    Object.assign(request, parseLlamaCppLogitBias(body.logit_bias));
    Object.assign(request, parseLlamaCppSamplers(body));
    const constraint = parseGrammarConstraint(body);
    if (isObject(body.json_schema)) {
        if (constraint !== undefined)
            fail(constraint.param, `give one output constraint, not json_schema and ${constraint.param}`);
        request.responseFormat = schemaFormat(body.json_schema, "json_schema");
    } else if (constraint !== undefined)
        request.responseFormat = constraint.format;
    if (optionalBooleanField(body, "return_tokens") === true)
        request.returnTokens = true;
    if (optionalBooleanField(body, "return_progress") === true)
        request.returnProgress = true;
    if (optionalBooleanField(body, "timings_per_token") === true)
        request.timingsPerToken = true;
    if (optionalBooleanField(body, "cache_prompt") === false)
        request.cachePrompt = false;
    const slot = parseIdSlot(body);
    if (slot !== undefined)
        request.slot = slot;
    if (nProbs !== undefined && nProbs > 0) {
        request.probs = nProbs;
        request.postSamplingProbs = optionalBooleanField(body, "post_sampling_probs") ?? false;
    }
    const minIndent = optionalNumberField(body, "n_indent", 0, 1e6, true);
    if (minIndent !== undefined && minIndent > 0) request.minIndent = minIndent;
    const maxGenerationMs = optionalNumberField(body, "t_max_predict_ms", 0, 1e9, false);
    if (maxGenerationMs !== undefined && maxGenerationMs > 0) request.maxGenerationMs = maxGenerationMs;
    return request;
}

/**
 * What a llama.cpp `/completion` or `/infill` answer or stream event carries, for a client reading it (the monitoring
 * proxy): its text, and in the last one (`stop: true`) the finish (`stop_type` limit → `length`) and the counts.
 * Undefined for a value that is not one.
 */
export function llamaCppAnswerContent(value: unknown): StreamChunkContent | undefined {
    if (!isObject(value) || typeof value.content !== "string" || typeof value.stop !== "boolean")
        return undefined;
    if (!value.stop)
        return {text: value.content, finishReason: null};
    const prompt = value.tokens_evaluated;
    const completion = value.tokens_predicted;
    const counted = typeof prompt === "number" && typeof completion === "number";
    return {text: value.content, finishReason: value.stop_type === "limit" ? "length" : "stop",
        ...counted ? {usage: {prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion}} : {}};
}
