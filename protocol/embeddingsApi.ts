/**
 * Embeddings, in the shapes clients send them: OpenAI's `POST /v1/embeddings` (also vLLM's and llama.cpp's server's:
 * `input` as a string, strings, token ids or lists of token ids; `encoding_format` float or base64; `dimensions`), and
 * Ollama's `POST /api/embed` (`input` a string or strings, `truncate` default true, `dimensions`) and its legacy
 * `POST /api/embeddings` (`prompt`, one unnormalized vector).
 */
import {ApiRequestError, fail, optionalBooleanField, optionalNumberField, tokenIdsField} from "./openaiFields.js";
import {isObject, type JsonObject} from "./validation.js";

/** One input: text, or token ids. */
export type EmbeddingInput = {text: string} | {tokens: number[]};

export type EmbeddingsRequest = {
    inputs: EmbeddingInput[],
    /** "base64": each vector as the base64 of its little-endian float32s (what the `openai` SDKs ask for). */
    encoding: "float" | "base64",
    /** Keep only the first N dimensions (renormalized), as OpenAI's and Ollama's shortening; absent: all. */
    dimensions?: number,
    /** Too long an input keeps its first tokens that fit (Ollama's default) instead of a 400 (OpenAI's). */
    truncate: boolean,
    /** The `model` field as sent (echoed). */
    model: string
};

/** OpenAI's bound on the inputs of one request. */
export const maxEmbeddingInputs = 2048;

function requireObject(value: unknown): JsonObject {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    return value;
}

function text(value: unknown, param: string): EmbeddingInput {
    if (typeof value !== "string" || value === "")
        fail(param, "expected a non-empty string");
    return {text: value};
}

/** `input`: a string, strings, token ids, or lists of token ids (OpenAI's four shapes). */
function parseInputs(value: unknown, allowTokens: boolean): EmbeddingInput[] {
    if (typeof value === "string")
        return [text(value, "input")];
    if (!Array.isArray(value) || value.length === 0 || value.length > maxEmbeddingInputs)
        fail("input", `expected a string or a non-empty array of at most ${maxEmbeddingInputs} inputs`);
    if (allowTokens && value.every((item) => typeof item === "number"))
        return [{tokens: tokenIdsField(value, "input")}];
    return value.map((item, index): EmbeddingInput => {
        if (allowTokens && Array.isArray(item))
            return {tokens: tokenIdsField(item, `input[${index}]`)};
        return text(item, `input[${index}]`);
    });
}

function parseDimensions(body: JsonObject): number | undefined {
    return optionalNumberField(body, "dimensions", 1, 1 << 20, true);
}

/** Validates a `POST /v1/embeddings` body; throws ApiRequestError naming the field. */
export function parseEmbeddingsRequest(value: unknown): EmbeddingsRequest {
    const body = requireObject(value);
    if (body.model !== undefined && body.model !== null && typeof body.model !== "string")
        fail("model", "expected a string");
    const encoding = body.encoding_format ?? "float";
    if (encoding !== "float" && encoding !== "base64")
        fail("encoding_format", "expected \"float\" or \"base64\"");
    const request: EmbeddingsRequest = {inputs: parseInputs(body.input, true), encoding, truncate: false,
        model: typeof body.model === "string" ? body.model : ""};
    const dimensions = parseDimensions(body);
    if (dimensions !== undefined) request.dimensions = dimensions;
    return request;
}

/** Validates a `POST /api/embed` body (Ollama); an empty list of inputs is allowed (no vectors). */
export function parseOllamaEmbedRequest(value: unknown): EmbeddingsRequest {
    const body = requireObject(value);
    if (typeof body.model !== "string" || body.model === "")
        fail("model", "expected the model's name");
    const inputs = Array.isArray(body.input) && body.input.length === 0 ? [] : parseInputs(body.input, false);
    const request: EmbeddingsRequest = {inputs, encoding: "float", truncate: optionalBooleanField(body, "truncate") ?? true, model: body.model};
    const dimensions = parseDimensions(body);
    if (dimensions !== undefined) request.dimensions = dimensions;
    return request;
}

/** Validates a `POST /api/embeddings` body (Ollama's legacy route): one `prompt`, its vector unnormalized. */
export function parseOllamaLegacyEmbeddingsRequest(value: unknown): {model: string, prompt: string} {
    const body = requireObject(value);
    if (typeof body.model !== "string" || body.model === "")
        fail("model", "expected the model's name");
    const prompt = body.prompt ?? "";
    if (typeof prompt !== "string")
        fail("prompt", "expected a string");
    return {model: body.model, prompt};
}

/** OpenAI's answer. */
export type EmbeddingsResponse = {
    object: "list",
    data: Array<{object: "embedding", index: number, embedding: number[] | string}>,
    model: string,
    usage: {prompt_tokens: number, total_tokens: number}
};

/** Ollama's `/api/embed` answer (durations in nanoseconds). */
export type OllamaEmbedResponse = {
    model: string, embeddings: number[][], total_duration: number, load_duration: number, prompt_eval_count: number
};

/**
 * The prompt tokens an embeddings answer reports, for the monitoring proxy: OpenAI's `usage.prompt_tokens`, Ollama's
 * `prompt_eval_count` (`/api/embed`); undefined for a body that is not an embeddings answer (or Ollama's legacy one,
 * which has no count: `{}`).
 */
export function embeddingsUsage(value: unknown): {promptTokens?: number} | undefined {
    if (!isObject(value))
        return undefined;
    if (value.object === "list" && Array.isArray(value.data) && value.data.every((item) => isObject(item) && item.object === "embedding")) {
        const usage = value.usage;
        return isObject(usage) && typeof usage.prompt_tokens === "number" ? {promptTokens: usage.prompt_tokens} : {};
    }
    if (Array.isArray(value.embeddings))
        return typeof value.prompt_eval_count === "number" ? {promptTokens: value.prompt_eval_count} : {};
    if (Array.isArray(value.embedding))
        return {};
    return undefined;
}
