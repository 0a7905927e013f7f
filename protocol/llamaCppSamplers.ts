/**
 * llama.cpp's server's DRY and XTC sampler fields (`dry_multiplier`, `dry_base`, `dry_allowed_length`,
 * `dry_penalty_last_n`, `dry_sequence_breakers`; `xtc_probability`, `xtc_threshold`), which it reads on `/completion` and
 * on its OpenAI endpoints alike, with its defaults: both off until their multiplier or probability is above 0; DRY looks
 * at the last 64 tokens (−1, which older llama-server versions took: the context).
 */
import {
    maxDrySequenceBreakerLength, maxDrySequenceBreakers, type DryPenalty, type ExcludeTopChoices, type GenerateRequest
} from "./engineMessages.js";
import {fail, optionalNumberField} from "./openaiFields.js";
import type {JsonObject} from "./validation.js";

/** llama.cpp's defaults for the fields a request leaves out (also what `/props` reports). */
export const dryDefaults = {base: 1.75, allowedLength: 2, lastTokens: 64, sequenceBreakers: ["\n", ":", "\"", "*"]} as const;
export const defaultXtcThreshold = 0.1;

export type LlamaCppSamplers = Pick<GenerateRequest, "dry" | "xtc">;

export function parseLlamaCppSamplers(body: JsonObject): LlamaCppSamplers {
    const samplers: LlamaCppSamplers = {};
    const dry = parseDry(body);
    if (dry !== undefined) samplers.dry = dry;
    const xtc = parseXtc(body);
    if (xtc !== undefined) samplers.xtc = xtc;
    return samplers;
}

/** Undefined when off (no multiplier, or a window of 0 tokens). */
function parseDry(body: JsonObject): DryPenalty | undefined {
    const multiplier = optionalNumberField(body, "dry_multiplier", 0, 1e6, false) ?? 0;
    // As llama.cpp's server: a base below 1 means its default.
    const base = optionalNumberField(body, "dry_base", -1e6, 1e6, false);
    const allowedLength = optionalNumberField(body, "dry_allowed_length", 0, 2 ** 31 - 1, true) ?? dryDefaults.allowedLength;
    const lastTokens = optionalNumberField(body, "dry_penalty_last_n", -1, 2 ** 31 - 1, true) ?? dryDefaults.lastTokens;
    const breakers = body.dry_sequence_breakers;
    if (breakers !== undefined && breakers !== null && (!Array.isArray(breakers) || breakers.length === 0 ||
        breakers.length > maxDrySequenceBreakers ||
        !breakers.every((breaker) => typeof breaker === "string" && breaker.length <= maxDrySequenceBreakerLength)))
        fail("dry_sequence_breakers",
            `expected a non-empty array of at most ${maxDrySequenceBreakers} strings of at most ${maxDrySequenceBreakerLength} characters`);
    if (multiplier === 0 || lastTokens === 0)
        return undefined;
    return {multiplier, base: base === undefined || base < 1 ? dryDefaults.base : base, allowedLength, lastTokens,
        sequenceBreakers: Array.isArray(breakers) ? breakers as string[] : [...dryDefaults.sequenceBreakers]};
}

/** Undefined when off (probability 0, or a threshold above 0.5, where no two tokens can both reach it). */
function parseXtc(body: JsonObject): ExcludeTopChoices | undefined {
    const probability = optionalNumberField(body, "xtc_probability", 0, 1, false) ?? 0;
    const threshold = optionalNumberField(body, "xtc_threshold", 0, 1, false) ?? defaultXtcThreshold;
    return probability > 0 && threshold <= 0.5 ? {probability, threshold} : undefined;
}
