/**
 * The sampling fields of OpenAI's API beyond temperature, top_p and seed, with vLLM's and llama.cpp's
 * extensions: penalties, logit bias, structured output (`response_format`) and log-probabilities, read
 * into the engine's terms.
 */
import {
    maxAdditivePenalty, maxLogitBias, maxLogitBiasEntries, maxTopLogprobs, type LogitBias, type ResponseFormat, type SamplingPenalties
} from "./engineMessages.js";
import {unsupportedSchemaPart} from "./jsonSchemaSubset.js";
import {fail, optionalBooleanField, optionalNumberField} from "./openaiFields.js";
import {isObject, type JsonObject} from "./validation.js";

/** Penalties from OpenAI's, vLLM's and llama.cpp's fields; undefined when none is given. */
export function parsePenalties(body: JsonObject): SamplingPenalties | undefined {
    const penalties: SamplingPenalties = {};
    const presence = optionalNumberField(body, "presence_penalty", -maxAdditivePenalty, maxAdditivePenalty, false);
    if (presence !== undefined) penalties.presence = presence;
    const frequency = optionalNumberField(body, "frequency_penalty", -maxAdditivePenalty, maxAdditivePenalty, false);
    if (frequency !== undefined) penalties.frequency = frequency;
    const repetition = optionalNumberField(body, "repetition_penalty", 0, 1e6, false);
    const repeat = optionalNumberField(body, "repeat_penalty", 0, 1e6, false);
    if (repetition !== undefined && repeat !== undefined && repetition !== repeat)
        fail("repeat_penalty", `differs from repetition_penalty (${repeat} vs ${repetition}); they are the same setting, give one`);
    const penalty = repetition ?? repeat;
    if (penalty === 0)
        fail(repetition !== undefined ? "repetition_penalty" : "repeat_penalty", "must be greater than 0");
    if (penalty !== undefined) penalties.repeat = penalty;
    const lastTokens = optionalNumberField(body, "repeat_last_n", -1, 1e9, true);
    if (lastTokens !== undefined) penalties.lastTokens = lastTokens;
    return Object.keys(penalties).length > 0 ? penalties : undefined;
}

/** OpenAI's `logit_bias`: an object of token ids (as strings) to biases in [−100, 100]. */
export function parseLogitBias(value: unknown): LogitBias[] | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (!isObject(value))
        fail("logit_bias", "expected an object of token ids to biases");
    const entries = Object.entries(value);
    if (entries.length > maxLogitBiasEntries)
        fail("logit_bias", `at most ${maxLogitBiasEntries} tokens`);
    return entries.map(([key, bias]) => {
        if (!/^\d{1,9}$/.test(key))
            fail("logit_bias", `keys are token ids (non-negative integers), got ${JSON.stringify(key).slice(0, 40)}`);
        if (typeof bias !== "number" || !(Math.abs(bias) <= maxLogitBias))
            fail("logit_bias", `the bias of token ${key} must be a number in [−${maxLogitBias}, ${maxLogitBias}]`);
        return {token: Number(key), bias};
    });
}

/** Refuses a `logit_bias` naming a token the model does not have (the engine would refuse it too, without naming the field). */
export function checkLogitBias(logitBias: readonly LogitBias[] | undefined, vocabularySize: number | undefined): void {
    for (const {token} of logitBias ?? []) {
        if (vocabularySize === undefined)
            fail("logit_bias", "not supported with this model: its file does not list its vocabulary");
        if (token >= vocabularySize)
            fail("logit_bias", `token ${token} is not in the model's vocabulary (ids 0 to ${vocabularySize - 1})`);
    }
}

/** OpenAI's `response_format`: `text` (the default), `json_object`, or `json_schema` with the schema in `json_schema.schema`. */
export function parseResponseFormat(value: unknown): ResponseFormat | undefined {
    if (value === undefined || value === null)
        return undefined;
    if (!isObject(value))
        fail("response_format", "expected an object");
    switch (value.type) {
        case "text":
            return undefined;
        case "json_object":
            return {type: "json_object"};
        case "json_schema": {
            const spec = value.json_schema;
            if (!isObject(spec) || !isObject(spec.schema))
                fail("response_format.json_schema", "expected {\"name\": …, \"schema\": {…}} with the JSON schema in schema");
            return schemaFormat(spec.schema, "response_format.json_schema.schema");
        }
        default:
            fail("response_format.type", `expected text, json_object or json_schema${typeof value.type === "string" ? `, got ${JSON.stringify(value.type).slice(0, 40)}` : ""}`);
    }
}

/**
 * JSON fitting `schema` (given at `param`), checked against what a grammar can enforce: the chat endpoint's
 * `response_format`, the Responses API's `text.format`, Anthropic's `output_config.format`.
 */
export function schemaFormat(schema: JsonObject, param: string): ResponseFormat {
    const unsupported = unsupportedSchemaPart(schema);
    if (unsupported !== undefined)
        fail(param, `this schema cannot be enforced ${unsupported}`);
    return {type: "json_schema", schema};
}

/**
 * vLLM's `prompt_logprobs` (both endpoints): the prompt's tokens scored, each with this many most likely alternatives
 * (0: the token alone). As vLLM: not with a stream, except 0 (which a stream then leaves out); at most 20, vLLM's default
 * `max_logprobs`, so −1 (the whole vocabulary) is refused. Undefined: nothing to report.
 */
export function parsePromptLogprobs(body: JsonObject, stream: boolean): number | undefined {
    const value = optionalNumberField(body, "prompt_logprobs", -1, Number.MAX_SAFE_INTEGER, true);
    if (value === undefined)
        return undefined;
    if (stream && value !== 0)
        fail("prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`");
    if (value === -1 || value > maxTopLogprobs)
        fail("prompt_logprobs", `at most ${maxTopLogprobs} alternatives per prompt token (-1, the whole vocabulary, is not served), got ${value}`);
    return stream ? undefined : value;
}

/**
 * Alternatives per token to report, undefined for none. Chat: `logprobs: true` with `top_logprobs`
 * (0–20); completions: `logprobs: N` (OpenAI allows 0–5, vLLM up to 20: so does this server).
 */
export function parseLogprobs(body: JsonObject, kind: "chat" | "completions"): number | undefined {
    if (kind === "completions")
        return optionalNumberField(body, "logprobs", 0, maxTopLogprobs, true);
    const wanted = optionalBooleanField(body, "logprobs") ?? false;
    const top = optionalNumberField(body, "top_logprobs", 0, maxTopLogprobs, true);
    if (top !== undefined && !wanted)
        fail("top_logprobs", "only with logprobs: true");
    return wanted ? top ?? 0 : undefined;
}
