/**
 * Ollama's native API (`/api/chat`, `/api/generate`, `/api/show`, …: what the `ollama` libraries, Open WebUI, Continue's
 * and Cline's "Ollama" providers and Copilot Chat's Ollama models send), read into the engine request's terms, and the
 * shapes of its answers. Requests: `messages` (system, user, assistant with `thinking` and `tool_calls` whose
 * `arguments` are objects, tool results with `tool_name`), `prompt` with `system`, `suffix` (fill in the middle) or
 * `raw`, `tools` (OpenAI's function shape), `format` ("json" or a JSON schema), `think`, `logprobs` / `top_logprobs`,
 * `stream` (default true: NDJSON lines), and `options` — the sampling ones are served (`temperature`, `top_k`,
 * `top_p`, `min_p`, `seed`, `num_predict`, `stop`, `repeat_penalty`, `repeat_last_n`, `presence_penalty`,
 * `frequency_penalty`), the ones that configure a model load (`num_ctx`, `num_gpu`, `num_thread`, …) or samplers
 * llama.cpp dropped (`mirostat`, `tfs_z`, …) are ignored, as Ollama ignores options its runner does not take.
 * Images, a `template` of one's own and `context` (the deprecated token memory of /api/generate) are refused, naming
 * the field. Sampling defaults are Ollama's (top_p 0.9, repeat_penalty 1.1 over the last 64 tokens), not the engine's.
 */
import {
    maxStopLength, maxStopStrings, maxTopLogprobs, type ChatMessage, type GenerateRequest, type SamplingPenalties, type ToolCall
} from "./engineMessages.js";
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField} from "./openaiFields.js";
import {schemaFormat} from "./openaiSampling.js";
import {functionName, parseToolParams} from "./openaiTools.js";
import {isObject, type JsonObject} from "./validation.js";

/** What `/api/version` reports: the Ollama release whose API this server follows (clients check for a minimum). */
export const ollamaApiVersion = "0.13.0";

type EngineFields = Pick<GenerateRequest, "temperature" | "topP" | "topK" | "minP" | "seed" | "penalties" | "responseFormat" | "tools" |
    "allowReasoning" | "logprobs" | "prompt" | "messages" | "suffix" | "continueFinalMessage">;

/** A validated `/api/chat` or `/api/generate` request. */
export type OllamaRequest = EngineFields & {
    /** The `model` field as sent (echoed in the answer: this server runs one model, whatever the name). */
    model: string,
    /** `options.num_predict` when positive; undefined: as many as the context leaves (-1 and -2, Ollama's default). */
    maxTokens: number | undefined,
    stop: string[],
    stream: boolean,
    /** An empty `/api/generate` prompt or `/api/chat` conversation: Ollama loads the model and answers `done_reason: "load"`. */
    loadOnly: boolean,
    /**
     * `/api/generate` without `raw`: Ollama renders the prompt with the model's template as a user turn after `system`
     * (the route does, or for a model without a chat template sends the bare text, as Ollama's default template does).
     */
    templated?: {system: string, prompt: string},
    /** `think` true or an effort level: reasoning asked for (Ollama refuses it for a model that cannot reason). */
    thinkAskedFor?: boolean
};

/** Ollama's sampling defaults where the engine's differ (its `api.DefaultOptions`). */
const ollamaDefaults = {topP: 0.9, repeatPenalty: 1.1, repeatLastN: 64};
const maxMessages = 10_000;

/** Where a request's `options` field names a value, for errors (`options.top_k`). */
function optionNumber(options: JsonObject, key: string, min: number, max: number, integer: boolean): number | undefined {
    try {
        return optionalNumberField(options, key, min, max, integer);
    } catch (error) {
        if (error instanceof ApiRequestError)
            throw new ApiRequestError(`options.${error.message}`, `options.${key}`);
        throw error;
    }
}

function parseStop(value: unknown): string[] {
    if (value === undefined || value === null)
        return [];
    const list = typeof value === "string" ? [value] : value;
    if (!Array.isArray(list) || list.length > maxStopStrings)
        fail("options.stop", `expected a string or an array of at most ${maxStopStrings} strings`);
    return list.map((item, index) => {
        if (typeof item !== "string" || item === "" || item.length > maxStopLength)
            fail(`options.stop[${index}]`, `expected a non-empty string of at most ${maxStopLength} characters`);
        return item;
    });
}

/** The sampling `options` (and their Ollama defaults), num_predict, stop. */
function parseOptions(value: unknown): Pick<OllamaRequest, "temperature" | "topP" | "topK" | "minP" | "seed" | "penalties" | "maxTokens" | "stop"> {
    if (value !== undefined && value !== null && !isObject(value))
        fail("options", "expected an object");
    const options: JsonObject = isObject(value) ? value : {};
    const out: ReturnType<typeof parseOptions> = {maxTokens: undefined, stop: parseStop(options.stop)};
    const temperature = optionNumber(options, "temperature", 0, 100, false);
    if (temperature !== undefined) out.temperature = temperature;
    const topP = optionNumber(options, "top_p", 0, 1, false);
    // Ollama's runner treats top_p 0 (or 1) as "off".
    out.topP = topP === undefined ? ollamaDefaults.topP : topP === 0 ? 1 : topP;
    const topK = optionNumber(options, "top_k", 0, 1e9, true);
    if (topK !== undefined) out.topK = topK;
    const minP = optionNumber(options, "min_p", 0, 1, false);
    if (minP !== undefined) out.minP = minP;
    const seed = optionNumber(options, "seed", -(2 ** 53), 2 ** 53, true);
    // -1 (Ollama's default) is a random seed.
    if (seed !== undefined && seed >= 0) out.seed = seed;
    const numPredict = optionNumber(options, "num_predict", -2, 1e9, true);
    if (numPredict === 0)
        fail("options.num_predict", "must be positive, or -1 / -2 for as many tokens as the context leaves");
    if (numPredict !== undefined && numPredict > 0) out.maxTokens = numPredict;
    const penalties: SamplingPenalties = {
        repeat: optionNumber(options, "repeat_penalty", 0, 1e6, false) ?? ollamaDefaults.repeatPenalty,
        lastTokens: optionNumber(options, "repeat_last_n", -1, 1e9, true) ?? ollamaDefaults.repeatLastN
    };
    if (penalties.repeat === 0)
        fail("options.repeat_penalty", "must be greater than 0");
    const presence = optionNumber(options, "presence_penalty", -2, 2, false);
    if (presence !== undefined) penalties.presence = presence;
    const frequency = optionNumber(options, "frequency_penalty", -2, 2, false);
    if (frequency !== undefined) penalties.frequency = frequency;
    out.penalties = penalties;
    return out;
}

/** `format`: "json" (any JSON object), a JSON schema, or absent / "" (free text). */
function parseFormat(value: unknown): GenerateRequest["responseFormat"] {
    if (value === undefined || value === null || value === "")
        return undefined;
    if (value === "json")
        return {type: "json_object"};
    if (isObject(value))
        return schemaFormat(value, "format");
    return fail("format", "expected \"json\" or a JSON schema object");
}

/** `think`: false answers without reasoning; true or an effort level ("low", "medium", "high") lets a reasoning model reason. */
function parseThink(value: unknown): boolean | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (typeof value === "boolean")
        return value;
    if (value === "low" || value === "medium" || value === "high")
        return true;
    return fail("think", "expected true, false, \"low\", \"medium\" or \"high\"");
}

/** `logprobs` / `top_logprobs`: how many alternatives per token, or undefined for none. */
function parseLogprobs(body: JsonObject): number | undefined {
    const wanted = optionalBooleanField(body, "logprobs");
    const top = optionalNumberField(body, "top_logprobs", 0, maxTopLogprobs, true);
    if (wanted !== true)
        return undefined;
    return top ?? 0;
}

function refuseImages(value: JsonObject, param: string): void {
    if (Array.isArray(value.images) && value.images.length > 0)
        fail(`${param}.images`.replace(/^\./, ""), "this server's model takes no images");
}

function contentOf(message: JsonObject, param: string): string {
    const content = message.content;
    if (content === undefined || content === null)
        return "";
    if (typeof content !== "string")
        fail(`${param}.content`, "expected a string");
    return content;
}

/** An assistant's `tool_calls`: Ollama's `arguments` are an object (OpenAI's are JSON text); ids are made up, in order. */
function parseToolCalls(value: unknown, param: string, index: number): ToolCall[] | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (!Array.isArray(value))
        fail(`${param}.tool_calls`, "expected an array");
    return value.map((call, i): ToolCall => {
        const where = `${param}.tool_calls[${i}]`;
        if (!isObject(call) || !isObject(call.function))
            fail(where, "expected {\"function\": {\"name\": …, \"arguments\": {…}}}");
        const args = call.function.arguments;
        if (args !== undefined && args !== null && !isObject(args))
            fail(`${where}.function.arguments`, "expected an object");
        const id = typeof call.id === "string" && call.id !== "" ? call.id.slice(0, 200) : `call_${index}_${i}`;
        return {id, name: functionName(call.function.name, `${where}.function.name`), arguments: JSON.stringify(args ?? {})};
    });
}

function parseMessage(value: unknown, index: number): ChatMessage {
    const param = `messages[${index}]`;
    if (!isObject(value))
        fail(param, "expected an object");
    refuseImages(value, param);
    const role = value.role;
    const content = contentOf(value, param);
    if (role === "system" || role === "user")
        return {role, content};
    if (role === "tool")
        // Matched to the earliest call still without a result (Ollama names the tool, not the call).
        return {role: "tool", content};
    if (role !== "assistant")
        fail(`${param}.role`, "expected system, user, assistant or tool");
    const message: ChatMessage = {role: "assistant", content};
    const calls = parseToolCalls(value.tool_calls, param, index);
    if (calls !== undefined && calls.length > 0) message.toolCalls = calls;
    if (typeof value.thinking === "string" && value.thinking !== "") message.reasoning = value.thinking;
    return message;
}

function common(body: JsonObject): Omit<OllamaRequest, "prompt" | "messages" | "suffix" | "loadOnly" | "tools"> {
    if (typeof body.model !== "string" || body.model === "")
        fail("model", "expected the model's name");
    const request: ReturnType<typeof common> = {model: body.model, stream: optionalBooleanField(body, "stream") ?? true, ...parseOptions(body.options)};
    const responseFormat = parseFormat(body.format);
    if (responseFormat !== undefined) request.responseFormat = responseFormat;
    const think = parseThink(body.think);
    if (think === false) request.allowReasoning = false;
    if (think === true) request.thinkAskedFor = true;
    const logprobs = parseLogprobs(body);
    if (logprobs !== undefined) request.logprobs = logprobs;
    return request;
}

function requireObject(value: unknown): JsonObject {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    return value;
}

/** Validates a `POST /api/chat` body; throws ApiRequestError naming the field. */
export function parseOllamaChatRequest(value: unknown): OllamaRequest {
    const body = requireObject(value);
    const messages = body.messages ?? [];
    if (!Array.isArray(messages) || messages.length > maxMessages)
        fail("messages", `expected an array of at most ${maxMessages} messages`);
    const request: OllamaRequest = {...common(body), loadOnly: messages.length === 0};
    request.messages = messages.map(parseMessage);
    // A final assistant message is continued (Ollama's prefill), not answered.
    if (request.messages.at(-1)?.role === "assistant")
        request.continueFinalMessage = true;
    const {tools} = parseToolParams(body);
    if (tools !== undefined) request.tools = tools;
    return request;
}

/** Validates a `POST /api/generate` body; throws ApiRequestError naming the field. */
export function parseOllamaGenerateRequest(value: unknown): OllamaRequest {
    const body = requireObject(value);
    refuseImages(body, "");
    if (typeof body.template === "string" && body.template !== "")
        fail("template", "this server renders prompts with the model's own chat template only");
    if (Array.isArray(body.context) && body.context.length > 0)
        fail("context", "not supported (deprecated in Ollama): send the conversation to /api/chat instead");
    const prompt = body.prompt ?? "";
    if (typeof prompt !== "string")
        fail("prompt", "expected a string");
    const system = body.system ?? "";
    if (typeof system !== "string")
        fail("system", "expected a string");
    const suffix = body.suffix ?? "";
    if (typeof suffix !== "string")
        fail("suffix", "expected a string");
    const raw = optionalBooleanField(body, "raw") ?? false;
    const request: OllamaRequest = {...common(body), loadOnly: prompt === "" && suffix === ""};
    if (suffix !== "") {
        // Fill in the middle, raw or not (the FIM tokens frame prompt and suffix either way).
        request.prompt = prompt;
        request.suffix = suffix;
    } else if (raw)
        request.prompt = prompt;
    else
        request.templated = {system, prompt};
    return request;
}

/** `/api/show`'s body: the model's name (any name describes the one loaded model). */
export function parseOllamaShowRequest(value: unknown): {model: string} {
    const body = requireObject(value);
    const model = body.model ?? body.name;
    if (typeof model !== "string" || model === "")
        fail("model", "expected the model's name");
    return {model};
}

/** Ollama's error body. */
export type OllamaErrorBody = {error: string};

export type OllamaModelDetails = {
    parent_model: string, format: "gguf", family: string, families: string[], parameter_size: string, quantization_level: string
};

/** One model in `/api/tags` (`expires_at`, `size_vram`, `context_length` in `/api/ps`). */
export type OllamaModelEntry = {
    name: string, model: string, modified_at: string, size: number, digest: string, details: OllamaModelDetails,
    expires_at?: string, size_vram?: number, context_length?: number
};

export type OllamaShowResponse = {
    license: string, modelfile: string, parameters: string, template: string, details: OllamaModelDetails,
    model_info: Record<string, string | number>, capabilities: string[], modified_at: string
};

export type OllamaLogprob = {token: string, logprob: number, top_logprobs?: Array<{token: string, logprob: number}>};

/** Ollama's tool call: `arguments` is the object itself. */
export type OllamaToolCall = {function: {index: number, name: string, arguments: unknown}};

/** The timings and counts of a finished answer (durations in nanoseconds, as Ollama's). */
export type OllamaDoneFields = {
    done: true, done_reason: "stop" | "length" | "load", total_duration: number, load_duration: number,
    prompt_eval_count: number, prompt_eval_duration: number, eval_count: number, eval_duration: number
};

export type OllamaChatChunk = {
    model: string, created_at: string,
    message: {role: "assistant", content: string, thinking?: string, tool_calls?: OllamaToolCall[]},
    logprobs?: OllamaLogprob[]
} & ({done: false} | OllamaDoneFields);

export type OllamaGenerateChunk = {
    model: string, created_at: string, response: string, thinking?: string, logprobs?: OllamaLogprob[]
} & ({done: false} | OllamaDoneFields);
