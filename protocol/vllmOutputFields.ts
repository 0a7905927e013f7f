/**
 * vLLM's request fields about the output's text and the prompt's length, on its chat and completions endpoints:
 * `bad_words` (words never generated), `skip_special_tokens` (false: special tokens' text is output) and
 * `truncate_prompt_tokens` (only the prompt's last N tokens are evaluated). Validated here; the engine applies them.
 */
import {maxBadWordLength, maxBadWords, type GenerateRequest} from "./engineMessages.js";
import {fail, optionalBooleanField, optionalNumberField} from "./openaiFields.js";
import type {JsonObject} from "./validation.js";

/** These fields in engine terms (GenerateRequest's). */
export type VllmOutputFields = Pick<GenerateRequest, "badWords" | "outputSpecialTokens" | "truncatePromptTokens">;

export function parseVllmOutputFields(body: JsonObject): VllmOutputFields {
    const fields: VllmOutputFields = {};
    const words = body.bad_words;
    if (words !== undefined && words !== null) {
        if (!Array.isArray(words) || words.length > maxBadWords ||
            !words.every((word) => typeof word === "string" && word.length <= maxBadWordLength))
            fail("bad_words", `expected an array of at most ${maxBadWords} strings of at most ${maxBadWordLength} characters`);
        const nonEmpty = (words as string[]).filter((word) => word.trim() !== "");
        if (nonEmpty.length > 0) fields.badWords = nonEmpty;
    }
    if (optionalBooleanField(body, "skip_special_tokens") === false) fields.outputSpecialTokens = true;
    const truncate = optionalNumberField(body, "truncate_prompt_tokens", -1, 2 ** 31, true);
    if (truncate === 0)
        fail("truncate_prompt_tokens", "must be ≥ 1 (the prompt tokens to keep), or −1 for as many as the context holds");
    if (truncate !== undefined) fields.truncatePromptTokens = truncate;
    return fields;
}
