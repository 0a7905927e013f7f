/**
 * `logit_bias` as llama.cpp's server reads it, on `/completion`, `/infill` and its OpenAI endpoints — a superset of
 * OpenAI's object of token ids: the keys may also be texts, the whole may be an array of `[token id or text, bias]`
 * pairs, and a bias of `false` bans the token (here −100, OpenAI's ban). Each token of a text (tokenized alone, as
 * llama-server tokenizes it) gets the bias. Unlike llama-server, which skips entries it cannot read, a malformed entry
 * is a 400 naming it.
 */
import {maxLogitBias, maxLogitBiasEntries, maxTextBiasLength, type GenerateRequest} from "./engineMessages.js";
import {fail} from "./openaiFields.js";
import {isObject} from "./validation.js";

export type ParsedLogitBias = Pick<GenerateRequest, "logitBias" | "textBias">;

export function parseLlamaCppLogitBias(value: unknown): ParsedLogitBias {
    if (value === undefined || value === null)
        return {};
    let entries: Array<[unknown, unknown]>;
    if (Array.isArray(value)) {
        entries = value.map((entry, index) => {
            if (!Array.isArray(entry) || entry.length !== 2)
                fail("logit_bias", `entry ${index}: expected a [token id or text, bias] pair`);
            return [entry[0], entry[1]];
        });
    } else if (isObject(value)) {
        entries = Object.entries(value).map(([key, bias]) => [/^\d{1,9}$/.test(key) ? Number(key) : key, bias]);
    } else {
        return fail("logit_bias", "expected an object of token ids (or texts) to biases, or an array of [token id or text, bias] pairs");
    }
    if (entries.length > maxLogitBiasEntries)
        fail("logit_bias", `at most ${maxLogitBiasEntries} entries`);
    const parsed: Required<ParsedLogitBias> = {logitBias: [], textBias: []};
    for (const [key, rawBias] of entries) {
        const name = JSON.stringify(key).slice(0, 40);
        const bias = rawBias === false ? -maxLogitBias : rawBias;
        if (typeof bias !== "number" || !(Math.abs(bias) <= maxLogitBias))
            fail("logit_bias", `the bias of ${name} must be a number in [−${maxLogitBias}, ${maxLogitBias}] or false`);
        if (typeof key === "number" && Number.isInteger(key) && key >= 0)
            parsed.logitBias.push({token: key, bias});
        else if (typeof key === "string" && key !== "" && key.length <= maxTextBiasLength)
            parsed.textBias.push({text: key, bias});
        else
            fail("logit_bias", `${name}: expected a token id (an integer ≥ 0) or a text of 1 to ${maxTextBiasLength} characters`);
    }
    return {...parsed.logitBias.length > 0 ? {logitBias: parsed.logitBias} : {},
        ...parsed.textBias.length > 0 ? {textBias: parsed.textBias} : {}};
}
