/**
 * The OpenAI-compatible HTTP API the host serves (`inference-monitor serve`, and the extension's
 * endpoint): the request bodies it accepts, validated on arrival, and the bodies and stream chunks
 * it answers with. One declaration for the server and for the benchmark's HTTP client.
 *
 * Accepted like vLLM and llama.cpp's server: OpenAI's fields plus the extension field `ignore_eos`.
 * The sampling fields vLLM and llama.cpp add (`top_k`, `min_p`, `repetition_penalty` / `repeat_penalty`,
 * `repeat_last_n`) are honoured too, and `response_format` (JSON, or JSON fitting a schema, sampled under a
 * grammar; or text under a GBNF grammar, from llama.cpp's `grammar` or vLLM's `structured_outputs`: grammarFields.ts),
 * tool calling (`tools`, `tool_choice`, … in openaiTools.ts), and reasoning models' fields
 * (`reasoning_format`, `chat_template_kwargs.enable_thinking`, `reasoning_content`: openaiReasoning.ts). Fields this server does not
 * use (user, …) are ignored, as llama.cpp ignores fields it does not know; fields whose meaning it cannot
 * honour are refused with a 400 naming them.
 */
import {maxStopLength, maxStopStrings, maxStopTokenIds, type ChatMessage, type GenerateRequest} from "./engineMessages.js";
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField, tokenIdsField} from "./openaiFields.js";
import {parseLogprobs, parsePenalties, parsePromptLogprobs, parseResponseFormat} from "./openaiSampling.js";
import {parseGrammarConstraint} from "./grammarFields.js";
import {parseMessageToolCalls, parseToolParams, toolMessageFields, type ToolParams} from "./openaiTools.js";
import {parseMessageReasoning, parseReasoningParams, type ReasoningParams} from "./openaiReasoning.js";
import {parseVllmOutputFields, type VllmOutputFields} from "./vllmOutputFields.js";
import {parseLlamaCppSamplers} from "./llamaCppSamplers.js";
import {parseIdSlot} from "./llamaCppApi.js";
import {parseLlamaCppLogitBias} from "./llamaCppLogitBias.js";
import type {LlamaMeasureFields} from "./llamaCppMeasures.js";
import {isObject, type JsonObject} from "./validation.js";

type EngineSampling = Pick<GenerateRequest, "temperature" | "topP" | "topK" | "minP" | "penalties" | "logitBias" | "textBias" | "responseFormat" | "logprobs" |
    "seed" | "dry" | "xtc">;

/**
 * What both endpoints share, in engine terms: the engine request's sampling fields as the API's fields
 * give them (`top_k`, `min_p`, the penalties, `logit_bias`, `response_format`, chat `top_logprobs` or
 * completions `logprobs` → GenerateRequest's `topK` … `logprobs`), plus what only the API has.
 */
export type SamplingParams = EngineSampling & VllmOutputFields & {
    stream: boolean,
    includeUsage: boolean,
    /** Undefined when the request gave no limit (the server picks one that fits the context). */
    maxTokens?: number,
    stop: string[],
    ignoreEos: boolean,
    /** The `model` field as sent (informational: this server serves one model). */
    model?: string,
    /** Choices to generate (OpenAI's `n`): one engine request each, for the same prompt. */
    n: number,
    /** vLLM's `return_token_ids`: the answer carries the prompt's and the output's token ids. */
    returnTokenIds?: boolean,
    /** vLLM's `stop_token_ids`, `min_tokens`, `include_stop_str_in_output`; its `priority` as the engine's (higher first). */
    stopTokenIds?: number[],
    minTokens?: number,
    includeStopString?: boolean,
    priority?: number,
    /** vLLM's `prompt_logprobs`: the prompt's tokens scored with this many alternatives each (never with a stream). */
    promptLogprobs?: number,
    /** llama.cpp's `return_progress`: a stream reports the prompt's evaluation before its first token (llamaCppMeasures.ts). */
    returnProgress?: boolean,
    /** llama.cpp's `timings_per_token`: every streamed chunk carries the request's `timings` so far (llamaCppMeasures.ts). */
    timingsPerToken?: boolean,
    /** llama.cpp's `cache_prompt`: false reuses no cached prefix (the whole prompt is evaluated). */
    cachePrompt?: boolean,
    /** llama.cpp's `id_slot` (llamaCppApi.ts's parseIdSlot). */
    slot?: number
};

/** OpenAI's bound on `n`. */
export const maxChoices = 128;

/**
 * `continueFinalMessage`: vLLM's `continue_final_message`, the answer continues the final assistant message. `echo`:
 * vLLM's, the answer's content begins with the final message's when that is the assistant's (the role answering).
 */
export type ChatCompletionRequest = SamplingParams & ToolParams & ReasoningParams & {
    messages: ChatMessage[], continueFinalMessage?: boolean, echo?: boolean
};
/** A completion's prompt: text, or token ids (evaluated as given). */
export type CompletionPrompt = string | number[];
/**
 * `prompts`: OpenAI's `prompt` as a list (a string, token ids, or a batch of either: one completion each, `n` choices per
 * prompt, choice i of prompt p at index p × n + i). `echo`: each choice's text (and log-probabilities) begins with its
 * prompt's.
 */
export type CompletionRequest = SamplingParams & {prompts: CompletionPrompt[], echo: boolean, suffix?: string};

/** The most completions one request may ask for (prompts × `n`), OpenAI's bound on `n`. */
export const maxCompletionsPerRequest = maxChoices;

/** OpenAI's `usage.prompt_tokens_details`: `cached_tokens` = prompt tokens served from the prefix cache (vLLM's `num_cached_tokens`). */
export type PromptTokensDetails = {cached_tokens: number};
/**
 * Token counts of a response. This server always sends `prompt_tokens_details` (RequestLifecycle.cachedTokens),
 * in whole responses and in the final usage chunk of a stream, as OpenAI does; other servers may leave it out.
 */
export type Usage = {prompt_tokens: number, completion_tokens: number, total_tokens: number, prompt_tokens_details?: PromptTokensDetails,
    /** For an answer whose reasoning was separated: how many of the completion tokens were reasoning (OpenAI's field). */
    completion_tokens_details?: {reasoning_tokens: number}};
export type ApiFinishReason = "stop" | "length" | "tool_calls";

/** A tool call in a response: `arguments` is the JSON text the model wrote. */
export type ApiToolCall = {id: string, type: "function", function: {name: string, arguments: string}};

/** A chat token's log-probability as OpenAI reports it: its text, its UTF-8 bytes, and the alternatives. */
export type ChatTokenLogprob = {
    token: string, logprob: number, bytes: number[],
    top_logprobs: Array<{token: string, logprob: number, bytes: number[]}>
};
export type ChatLogprobs = {content: ChatTokenLogprob[], refusal: null};
/** The legacy completions shape: parallel arrays; `text_offset` = each token's start in the generated text. */
export type CompletionLogprobs = {
    tokens: string[],
    /** null for an echoed prompt's first token, which has nothing before it. */
    token_logprobs: Array<number | null>,
    top_logprobs: Array<Record<string, number> | null>,
    text_offset: number[]
};

/** One token's entry in vLLM's `prompt_logprobs`: `rank` 1 is the most likely token; `decoded_token` its text. */
export type ApiPromptTokenLogprob = {logprob: number, rank: number | null, decoded_token: string};
/**
 * vLLM's `prompt_logprobs`: one entry per prompt token, null for the first (nothing comes before it), else the token's own
 * entry and the most likely alternatives', keyed by token id.
 */
export type ApiPromptLogprobs = Array<Record<string, ApiPromptTokenLogprob> | null>;

/** vLLM's `stop_reason`: the stop string or the stop token id that ended a choice; null when neither did (the end of text, a limit). */
export type StopReason = string | number | null;

/** `timings`: llama.cpp's measurements of the request (llamaCppMeasures.ts), in an answer of one choice for one prompt. */
export type ChatCompletion = LlamaMeasureFields & {
    id: string, object: "chat.completion", created: number, model: string,
    /** With vLLM's `prompt_logprobs`: the rendered prompt's (where vLLM puts it in a chat answer). */
    prompt_logprobs?: ApiPromptLogprobs,
    /** With vLLM's `return_token_ids`: the rendered prompt's token ids (and each choice's `token_ids`, its output's). */
    prompt_token_ids?: number[],
    choices: Array<{index: number, message: {role: "assistant", content: string | null, reasoning_content?: string, tool_calls?: ApiToolCall[]},
        finish_reason: ApiFinishReason,
        logprobs: ChatLogprobs | null, token_ids?: number[], stop_reason?: StopReason}>,
    usage: Usage
};
/**
 * `prompt_progress`: llama.cpp's prompt progress, in chunks before the first token when the request asked (`return_progress`);
 * `timings`: its measurements, in the last chunk of an answer of one choice for one prompt, or in every chunk when the
 * request asked (`timings_per_token`).
 */
export type ChatCompletionChunk = LlamaMeasureFields & {
    id: string, object: "chat.completion.chunk", created: number, model: string,
    /** With `return_token_ids`: in a choice's first chunk. */
    prompt_token_ids?: number[],
    choices: Array<{
        index: number, delta: {role?: "assistant", content?: string, reasoning_content?: string, tool_calls?: Array<ApiToolCall & {index: number}>},
        finish_reason: ApiFinishReason | null, logprobs: ChatLogprobs | null,
        /** With `return_token_ids`: the ids of the tokens generated since the choice's previous chunk. */
        token_ids?: number[],
        /** In the chunk with the finish reason. */
        stop_reason?: StopReason
    }>,
    usage?: Usage | null
};
export type Completion = LlamaMeasureFields & {
    id: string, object: "text_completion", created: number, model: string,
    choices: Array<{index: number, text: string, finish_reason: ApiFinishReason, logprobs: CompletionLogprobs | null,
        /** With vLLM's `prompt_logprobs`: the choice's prompt's. */
        prompt_logprobs?: ApiPromptLogprobs,
        /** With vLLM's `return_token_ids`: the choice's prompt's token ids, and its output's. */
        prompt_token_ids?: number[], token_ids?: number[], stop_reason?: StopReason}>,
    usage: Usage
};
export type CompletionChunk = LlamaMeasureFields & {
    id: string, object: "text_completion", created: number, model: string,
    choices: Array<{index: number, text: string, finish_reason: ApiFinishReason | null, logprobs: CompletionLogprobs | null,
        /** With `return_token_ids`: the prompt's ids in a choice's first chunk; the ids of the tokens since its previous chunk. */
        prompt_token_ids?: number[], token_ids?: number[], stop_reason?: StopReason}>,
    usage?: Usage | null
};
export type ModelList = {
    object: "list",
    data: Array<{id: string, object: "model", created: number, owned_by: string, max_model_len: number}>
};

const maxMessages = 10_000;

function parseStop(value: unknown): string[] {
    if (value === undefined || value === null)
        return [];
    const list = typeof value === "string" ? [value] : value;
    if (!Array.isArray(list))
        fail("stop", "expected a string or an array of strings");
    if (list.length > maxStopStrings)
        fail("stop", `at most ${maxStopStrings} stop strings`);
    return list.map((item, index) => {
        if (typeof item !== "string" || item === "" || item.length > maxStopLength)
            fail(`stop[${index}]`, `expected a non-empty string of at most ${maxStopLength} characters`);
        return item;
    });
}

function parseSampling(body: JsonObject, kind: "chat" | "completions"): SamplingParams {
    const n = optionalNumberField(body, "n", 1, maxChoices, true) ?? 1;
    const logprobs = parseLogprobs(body, kind);
    const streamOptions = body.stream_options;
    if (streamOptions !== undefined && streamOptions !== null && !isObject(streamOptions))
        fail("stream_options", "expected an object");
    const stream = optionalBooleanField(body, "stream") ?? false;
    const includeUsage = isObject(streamOptions) ? optionalBooleanField(streamOptions, "include_usage") ?? false : false;
    if (isObject(streamOptions) && !stream)
        fail("stream_options", "only allowed with stream: true");
    const limit = optionalNumberField(body, "max_completion_tokens", 1, 1e9, true) ?? optionalNumberField(body, "max_tokens", -1, 1e9, true);
    // 0: the prompt only, scored (legacy completions with `echo`, as OpenAI and vLLM answer it).
    if (limit === 0 && !(kind === "completions" && body.echo === true))
        fail("max_tokens", "must be at least 1 (0 only with echo: true, for the prompt alone)");
    // llama.cpp's server's name for it (llama.vscode sends it): 0 evaluates the prompt only, into the prefix cache.
    const nPredict = limit === undefined ? optionalNumberField(body, "n_predict", -1, 1e9, true) : undefined;
    // −1: no limit, as llama.cpp's server reads it (what the context leaves).
    const maxTokens = (limit ?? nPredict) === -1 ? undefined : limit ?? nPredict;
    const temperature = optionalNumberField(body, "temperature", 0, 2, false);
    const topP = optionalNumberField(body, "top_p", 0, 1, false);
    if (topP === 0)
        fail("top_p", "must be greater than 0");
    const topK = optionalNumberField(body, "top_k", -1, 1e9, true);
    const minP = optionalNumberField(body, "min_p", 0, 1, false);
    const penalties = parsePenalties(body);
    const {logitBias, textBias} = parseLlamaCppLogitBias(body.logit_bias);
    const responseFormat = outputConstraint(body);
    const seed = optionalNumberField(body, "seed", -(2 ** 53), 2 ** 53, true);
    if (body.model !== undefined && body.model !== null && typeof body.model !== "string")
        fail("model", "expected a string");
    const params: SamplingParams = {stream, includeUsage, stop: parseStop(body.stop), ignoreEos: optionalBooleanField(body, "ignore_eos") ?? false, n};
    if (maxTokens !== undefined) params.maxTokens = maxTokens;
    if (temperature !== undefined) params.temperature = temperature;
    if (topP !== undefined) params.topP = topP;
    if (topK !== undefined) params.topK = Math.max(0, topK);
    if (minP !== undefined) params.minP = minP;
    if (penalties !== undefined) params.penalties = penalties;
    if (logitBias !== undefined) params.logitBias = logitBias;
    if (textBias !== undefined) params.textBias = textBias;
    if (responseFormat !== undefined) params.responseFormat = responseFormat;
    if (logprobs !== undefined) params.logprobs = logprobs;
    const promptLogprobs = parsePromptLogprobs(body, stream);
    if (promptLogprobs !== undefined) params.promptLogprobs = promptLogprobs;
    if (seed !== undefined) params.seed = seed;
    if (optionalBooleanField(body, "return_token_ids") === true) params.returnTokenIds = true;
    if (optionalBooleanField(body, "return_progress") === true) params.returnProgress = true;
    if (optionalBooleanField(body, "timings_per_token") === true) params.timingsPerToken = true;
    if (optionalBooleanField(body, "cache_prompt") === false) params.cachePrompt = false;
    const slot = parseIdSlot(body);
    if (slot !== undefined) params.slot = slot;
    Object.assign(params, parseVllmStopping(body, maxTokens), parseVllmOutputFields(body), parseLlamaCppSamplers(body));
    if (typeof body.model === "string") params.model = body.model;
    return params;
}

/**
 * vLLM's sampling extensions about where an answer ends: `stop_token_ids` (ids ending it), `min_tokens` (before that many,
 * neither the end of text nor those ids nor stop strings end it), `include_stop_str_in_output`; and `priority` (vLLM's:
 * lower first, so the engine's is its negation).
 */
function parseVllmStopping(body: JsonObject, maxTokens: number | undefined): Partial<SamplingParams> {
    const params: Partial<SamplingParams> = {};
    const ids = body.stop_token_ids;
    if (ids !== undefined && ids !== null) {
        if (!Array.isArray(ids) || ids.length > maxStopTokenIds || !ids.every((id) => Number.isInteger(id) && (id as number) >= 0))
            fail("stop_token_ids", `expected an array of at most ${maxStopTokenIds} token ids (non-negative integers)`);
        if (ids.length > 0) params.stopTokenIds = ids as number[];
    }
    const minTokens = optionalNumberField(body, "min_tokens", 0, 1e9, true);
    if (minTokens !== undefined && maxTokens !== undefined && minTokens > maxTokens)
        fail("min_tokens", `must not exceed max_tokens (${minTokens} > ${maxTokens})`);
    if (minTokens !== undefined && minTokens > 0) params.minTokens = minTokens;
    if (optionalBooleanField(body, "include_stop_str_in_output") === true) params.includeStopString = true;
    const priority = optionalNumberField(body, "priority", -(2 ** 31), 2 ** 31, true);
    if (priority !== undefined && priority !== 0) params.priority = -priority;
    return params;
}

/**
 * `response_format`, or a grammar constraint in llama.cpp's or vLLM's fields (grammarFields.ts): at most one of them.
 * Undefined: free text.
 */
function outputConstraint(body: JsonObject): SamplingParams["responseFormat"] {
    const responseFormat = parseResponseFormat(body.response_format);
    const constraint = parseGrammarConstraint(body);
    if (responseFormat !== undefined && constraint !== undefined)
        fail(constraint.param, `give one output constraint, not response_format and ${constraint.param}`);
    return responseFormat ?? constraint?.format;
}

/** Message content: a string, or an array of text parts (joined); other part types are refused. */
function parseContent(value: unknown, param: string, role: string): string {
    if (typeof value === "string")
        return value;
    if ((value === null || value === undefined) && (role === "assistant" || role === "function"))
        return "";
    if (!Array.isArray(value))
        fail(param, "expected a string or an array of text parts");
    return value.map((part, index) => {
        if (!isObject(part) || part.type !== "text" || typeof part.text !== "string")
            fail(`${param}[${index}]`, `only {"type": "text", "text": …} parts are supported${isObject(part) && typeof part.type === "string" ? `, got type ${JSON.stringify(part.type).slice(0, 40)}` : ""}`);
        return part.text;
    }).join("");
}

function parseMessage(value: unknown, index: number): ChatMessage {
    const param = `messages[${index}]`;
    if (!isObject(value))
        fail(param, "expected an object");
    const role = value.role;
    if (role !== "system" && role !== "developer" && role !== "user" && role !== "assistant" && role !== "tool" && role !== "function")
        fail(`${param}.role`, `expected one of system, developer, user, assistant, tool${typeof role === "string" ? `, got ${JSON.stringify(role).slice(0, 40)}` : ""}`);
    const content = parseContent(value.content, `${param}.content`, role);
    if (role === "tool" || role === "function")
        return {role: "tool", content, ...toolMessageFields(value, param)};
    if (role === "assistant") {
        const toolCalls = parseMessageToolCalls(value, param);
        const reasoning = parseMessageReasoning(value, param);
        return {role, content, ...toolCalls !== undefined && toolCalls.length > 0 ? {toolCalls} : {},
            ...reasoning !== undefined ? {reasoning} : {}};
    }
    return {role: role === "developer" ? "system" : role, content};
}

function expectBody(value: unknown): JsonObject {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    return value;
}

/** Validates a `POST /v1/chat/completions` body; throws ApiRequestError naming the field. */
export function parseChatCompletionRequest(value: unknown): ChatCompletionRequest {
    const body = expectBody(value);
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0)
        fail("messages", "expected a non-empty array");
    if (messages.length > maxMessages)
        fail("messages", `at most ${maxMessages} messages`);
    const request: ChatCompletionRequest = {...parseSampling(body, "chat"), ...parseToolParams(body), ...parseReasoningParams(body),
        messages: messages.map(parseMessage)};
    if (request.toolChoice !== undefined && request.ignoreEos)
        fail("ignore_eos", "cannot be used with a tool_choice that demands a call (the call ends the answer)");
    if (request.toolChoice !== undefined && request.responseFormat !== undefined)
        fail(parseResponseFormat(body.response_format) !== undefined ? "response_format" : parseGrammarConstraint(body)?.param ?? "response_format",
            "cannot be used with a tool_choice that demands a call");
    if (optionalBooleanField(body, "echo") === true)
        request.echo = true;
    if (optionalBooleanField(body, "continue_final_message") === true) {
        if (request.messages.at(-1)?.role !== "assistant")
            fail("continue_final_message", "the last message must be the assistant's message to continue");
        request.continueFinalMessage = true;
    }
    return request;
}

/** Validates a `POST /v1/completions` body; throws ApiRequestError naming the field. */
export function parseCompletionRequest(value: unknown): CompletionRequest {
    const body = expectBody(value);
    const prompts = parsePrompts(body.prompt);
    const echo = optionalBooleanField(body, "echo") ?? false;
    const request: CompletionRequest = {...parseSampling(body, "completions"), prompts, echo};
    if (prompts.length * request.n > maxCompletionsPerRequest)
        fail("prompt", `at most ${maxCompletionsPerRequest} completions per request: ${prompts.length} prompts × n = ${request.n} asks for ${prompts.length * request.n}`);
    if (body.suffix !== undefined && body.suffix !== null) {
        if (typeof body.suffix !== "string")
            fail("suffix", "expected a string");
        if (prompts.some((prompt) => typeof prompt !== "string"))
            fail("suffix", "needs a text prompt, not token ids");
        if (echo)
            fail("echo", "cannot be used with suffix");
        request.suffix = body.suffix;
    }
    return request;
}

/** OpenAI's `prompt`: a string, an array of token ids, or a non-empty array of strings and token-id arrays. */
function parsePrompts(value: unknown): CompletionPrompt[] {
    if (typeof value === "string")
        return [value];
    if (!Array.isArray(value) || value.length === 0)
        fail("prompt", "expected a string, an array of token ids, or a non-empty array of those");
    if (value.every((item) => typeof item === "number"))
        return [tokenIdsField(value, "prompt")];
    return value.map((item: unknown, index) => {
        if (typeof item === "string")
            return item;
        if (!Array.isArray(item))
            fail(`prompt[${index}]`, "expected a string or an array of token ids");
        return tokenIdsField(item, `prompt[${index}]`);
    });
}

/**
 * What a streamed chunk of either endpoint carries, for a client reading the stream (the benchmark, the
 * monitoring proxy). `text` is everything the chunk adds to the output: its content, a thinking model's
 * reasoning (`reasoning_content` as llama.cpp's server and vLLM stream it, or `reasoning`), and tool calls'
 * names and arguments — all generated tokens, so a chunk with any of them is a delivery (the first one: TTFT).
 */
export type StreamChunkContent = {text: string, finishReason: string | null, usage?: Usage, error?: string};

/** The generated text in a chat delta (or a whole message): reasoning, content, tool calls. */
function deltaText(delta: JsonObject): string {
    let text = "";
    for (const key of ["reasoning_content", "reasoning", "content"])
        if (typeof delta[key] === "string") text += delta[key];
    const calls: unknown = delta.tool_calls;
    if (Array.isArray(calls))
        for (const call of calls as unknown[])
            if (isObject(call) && isObject(call.function))
                for (const key of ["name", "arguments"])
                    if (typeof call.function[key] === "string") text += call.function[key];
    return text;
}

/** Reads one `data:` payload of a chat or completions stream (the benchmark's HTTP client); throws on a malformed one. */
export function parseStreamChunk(value: unknown): StreamChunkContent {
    if (!isObject(value))
        throw new ApiRequestError("stream chunk: expected an object", null);
    if (isObject(value.error))
        return {text: "", finishReason: null, error: typeof value.error.message === "string" ? value.error.message : "error"};
    const choices = Array.isArray(value.choices) ? value.choices : [];
    const choice: unknown = choices[0];
    let text = "";
    let finishReason: string | null = null;
    if (isObject(choice)) {
        const delta = choice.delta;
        if (isObject(delta))
            text = deltaText(delta);
        else if (typeof choice.text === "string")
            text = choice.text;
        if (typeof choice.finish_reason === "string")
            finishReason = choice.finish_reason;
    }
    const chunk: StreamChunkContent = {text, finishReason};
    const usage = value.usage;
    if (isObject(usage) && typeof usage.prompt_tokens === "number" && typeof usage.completion_tokens === "number") {
        chunk.usage = {prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens,
            total_tokens: typeof usage.total_tokens === "number" ? usage.total_tokens : usage.prompt_tokens + usage.completion_tokens};
        const details = usage.prompt_tokens_details;
        if (isObject(details) && typeof details.cached_tokens === "number")
            chunk.usage.prompt_tokens_details = {cached_tokens: details.cached_tokens};
    }
    return chunk;
}
