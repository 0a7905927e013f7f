/**
 * Reasoning ("thinking") models on the chat endpoint, with the fields llama.cpp's server and vLLM accept: the
 * answer's reasoning comes apart from its content as `reasoning_content` (llama.cpp's server's default
 * `reasoning_format`; `"none"` leaves it in the content as generated), `chat_template_kwargs.enable_thinking:
 * false` asks for an answer without reasoning (Qwen3's switch), and an assistant message may carry the reasoning
 * it wrote (`reasoning_content`, or vLLM's newer `reasoning`). Read into the engine request's terms.
 */
import type {GenerateRequest} from "./engineMessages.js";
import {fail} from "./openaiFields.js";
import {isObject, type JsonObject} from "./validation.js";

export type ReasoningParams = Pick<GenerateRequest, "separateReasoning" | "allowReasoning">;

/** llama.cpp's server's values; "deepseek-legacy" (reasoning in both places) is not served. */
const separatingFormats = ["auto", "deepseek"];

/** The longest past reasoning one message may carry (characters; the context bounds it anyway). */
const maxReasoningLength = 1 << 20;

export function parseReasoningParams(body: JsonObject): ReasoningParams {
    const params: ReasoningParams = {};
    const format = body.reasoning_format;
    if (format !== undefined && format !== null) {
        if (format === "none")
            params.separateReasoning = false;
        else if (typeof format !== "string" || !separatingFormats.includes(format))
            fail("reasoning_format", `expected "none", "auto" or "deepseek"${typeof format === "string" ? `, got ${JSON.stringify(format).slice(0, 40)}` : ""}`);
    }
    const kwargs = body.chat_template_kwargs;
    if (kwargs !== undefined && kwargs !== null) {
        // Templates are rendered by node-llama-cpp's chat wrapper, which takes no arbitrary variables: only this one is honoured.
        if (!isObject(kwargs))
            fail("chat_template_kwargs", "expected an object");
        const enable = kwargs.enable_thinking;
        if (enable !== undefined && enable !== null && typeof enable !== "boolean")
            fail("chat_template_kwargs.enable_thinking", "expected a boolean");
        if (enable === false)
            params.allowReasoning = false;
    }
    return params;
}

/** An assistant message's past reasoning (`reasoning_content`, or `reasoning`); undefined when it has none. */
export function parseMessageReasoning(message: JsonObject, param: string): string | undefined {
    const key = message.reasoning_content !== undefined && message.reasoning_content !== null ? "reasoning_content" : "reasoning";
    const value = message[key];
    if (value === undefined || value === null || value === "")
        return undefined;
    if (typeof value !== "string" || value.length > maxReasoningLength)
        fail(`${param}.${key}`, `expected a string of at most ${maxReasoningLength} characters`);
    return value;
}
