/**
 * A request's sampling fields beyond temperature, top-p and seed — top-k, min-p, repetition penalties
 * and logit bias — checked against the model and turned into node-llama-cpp's evaluate options, once
 * per request. A request that sets none gets no options here, so its sampler chain is node-llama-cpp's
 * default one.
 */
import {
    defaultPenaltyLastTokens, maxAdditivePenalty, maxLogitBias, type GenerateRequest, type SamplingPenalties
} from "../protocol/engineMessages.js";
import type {LlamaModel, SequenceEvaluateOptions, Token, TokenBiasClass} from "./llamaTypes.js";
import {BadWords} from "./badWords.js";

/** What a request adds to node-llama-cpp's evaluate options (the grammar: engine/responseGrammar.ts). */
export type ExtraSampling = Pick<SequenceEvaluateOptions, "topK" | "minP" | "repeatPenalty" | "tokenBias" | "grammarEvaluationState" |
    "dryRepeatPenalty" | "xtc">;

type SamplingFields = Pick<GenerateRequest, "topK" | "minP" | "penalties" | "logitBias" | "textBias" | "stopTokenIds" | "minTokens" |
    "badWords" | "dry" | "xtc" | "responseFormat" | "toolChoice"> & Partial<Pick<GenerateRequest, "maxTokens">>;

/** Why these fields cannot be used with a model of `vocabularySize` tokens (undefined: unknown), or undefined when they can. */
export function invalidSampling(request: SamplingFields, vocabularySize: number | undefined): string | undefined {
    if (request.topK !== undefined && !(Number.isInteger(request.topK) && request.topK >= 0))
        return `topK must be an integer ≥ 0, got ${request.topK}`;
    if (request.minP !== undefined && !(request.minP >= 0 && request.minP <= 1))
        return `minP must be in [0, 1], got ${request.minP}`;
    const penalties = request.penalties;
    if (penalties?.repeat !== undefined && !(penalties.repeat > 0 && Number.isFinite(penalties.repeat)))
        return `penalties.repeat must be > 0, got ${penalties.repeat}`;
    for (const key of ["presence", "frequency"] as const) {
        const value = penalties?.[key];
        if (value !== undefined && !(Math.abs(value) <= maxAdditivePenalty))
            return `penalties.${key} must be in [−${maxAdditivePenalty}, ${maxAdditivePenalty}], got ${value}`;
    }
    if (penalties?.lastTokens !== undefined && !(Number.isInteger(penalties.lastTokens) && penalties.lastTokens >= -1))
        return `penalties.lastTokens must be an integer ≥ −1, got ${penalties.lastTokens}`;
    for (const {token, bias} of request.logitBias ?? []) {
        if (vocabularySize === undefined)
            return "logitBias cannot be used with this model: its file does not list its vocabulary";
        if (!(Number.isInteger(token) && token >= 0 && token < vocabularySize))
            return `logitBias: token ${token} is not in the model's vocabulary (ids 0 to ${vocabularySize - 1})`;
        if (!(Math.abs(bias) <= maxLogitBias))
            return `logitBias: the bias of token ${token} must be in [−${maxLogitBias}, ${maxLogitBias}], got ${bias}`;
    }
    for (const {text, bias} of request.textBias ?? [])
        if (!(Math.abs(bias) <= maxLogitBias))
            return `textBias: the bias of ${JSON.stringify(text).slice(0, 40)} must be in [−${maxLogitBias}, ${maxLogitBias}], got ${bias}`;
    const dry = request.dry;
    if (dry !== undefined && !(dry.multiplier >= 0 && dry.base >= 1 && Number.isInteger(dry.allowedLength) && dry.allowedLength >= 0 &&
        Number.isInteger(dry.lastTokens) && dry.lastTokens >= -1 && dry.sequenceBreakers.length > 0))
        return "dry: expected multiplier ≥ 0, base ≥ 1, allowedLength an integer ≥ 0, lastTokens an integer ≥ −1, and sequence breakers";
    if (request.xtc !== undefined && !(request.xtc.probability >= 0 && request.xtc.probability <= 1 &&
        request.xtc.threshold >= 0 && request.xtc.threshold <= 1))
        return "xtc: probability and threshold must be in [0, 1]";
    for (const token of request.stopTokenIds ?? [])
        if (vocabularySize !== undefined && token >= vocabularySize)
            return `stopTokenIds: token ${token} is not in the model's vocabulary (ids 0 to ${vocabularySize - 1})`;
    const minTokens = request.minTokens ?? 0;
    if (request.maxTokens !== undefined && minTokens > request.maxTokens)
        return `minTokens (${minTokens}) must not exceed maxTokens (${request.maxTokens})`;
    // A complete grammar allows only the end of generation, which minTokens bans: no token would be left to sample.
    if (minTokens > 0 && (request.responseFormat !== undefined || (request.toolChoice !== undefined && request.toolChoice !== "auto")))
        return "minTokens cannot be used with a grammar (a response format or a forced tool call): it would ban the end the grammar leaves";
    return undefined;
}

/** The penalty window in tokens for a sequence of `contextTokens` cells (0: no penalties). */
function penaltyWindow(penalties: SamplingPenalties, contextTokens: number): number {
    const lastTokens = penalties.lastTokens ?? defaultPenaltyLastTokens;
    return lastTokens === -1 ? contextTokens : lastTokens;
}

/** The last `count` tokens of `prompt` followed by `generated`. */
export function lastTokens(prompt: readonly Token[], generated: readonly Token[], count: number): Token[] {
    if (count <= 0)
        return [];
    if (generated.length >= count)
        return generated.slice(generated.length - count);
    return prompt.slice(Math.max(0, prompt.length - (count - generated.length))).concat(generated);
}

/**
 * node-llama-cpp's options for a request already checked with `invalidSampling`. `history` gives the
 * request's prompt and output so far, read at each token (the penalties' window slides with it).
 */
export function extraSampling(request: SamplingFields, model: LlamaModel, TokenBias: TokenBiasClass, contextTokens: number,
                              history: () => {prompt: readonly Token[], generated: readonly Token[]},
                              endTokens: () => readonly Token[]): ExtraSampling {
    const options: ExtraSampling = {};
    if (request.topK !== undefined)
        options.topK = request.topK;
    if (request.minP !== undefined)
        options.minP = request.minP;
    const penalties = request.penalties;
    const window = penalties === undefined ? 0 : penaltyWindow(penalties, contextTokens);
    if (penalties !== undefined && window > 0 &&
        ((penalties.repeat ?? 1) !== 1 || (penalties.presence ?? 0) !== 0 || (penalties.frequency ?? 0) !== 0))
        options.repeatPenalty = {
            punishTokens: () => {
                const {prompt, generated} = history();
                return lastTokens(prompt, generated, window);
            },
            // A fixed window lets node-llama-cpp slide its penalty sampler by one token per step instead of rebuilding it.
            maxPunishTokens: window,
            penalty: penalties.repeat ?? 1,
            presencePenalty: penalties.presence ?? 0,
            frequencyPenalty: penalties.frequency ?? 0
        };
    if (request.dry !== undefined && request.dry.multiplier > 0 && request.dry.lastTokens !== 0)
        options.dryRepeatPenalty = {strength: request.dry.multiplier, base: request.dry.base,
            // node-llama-cpp raises an allowed length of 0 to 1 (llama-server takes 0).
            allowedLength: request.dry.allowedLength, sequenceBreakers: request.dry.sequenceBreakers,
            // Always given: node-llama-cpp's default (−1) reads as 0 in this llama.cpp, which turns DRY off.
            lastTokens: request.dry.lastTokens === -1 ? contextTokens : request.dry.lastTokens};
    if (request.xtc !== undefined && request.xtc.probability > 0)
        options.xtc = {probability: request.xtc.probability, threshold: request.xtc.threshold};
    const textBiases = (request.textBias ?? []).flatMap(({text, bias}) => model.tokenize(text, false).map((token) => ({token, bias})));
    if ((request.logitBias?.length ?? 0) + textBiases.length > 0) {
        const bias = new TokenBias(model.tokenizer);
        const biases = biasesOf(bias);
        // A token listed twice (or twice in a text) gets both biases, as llama.cpp's logit-bias sampler adds each entry.
        for (const entry of [...request.logitBias ?? [], ...textBiases])
            biases.set(entry.token as Token, (biases.get(entry.token as Token) ?? 0) + entry.bias);
        options.tokenBias = bias;
    }
    const minTokens = request.minTokens ?? 0;
    const badWords = request.badWords !== undefined && request.badWords.length > 0 ? new BadWords(model, request.badWords) : undefined;
    if (minTokens > 0 || badWords !== undefined)
        options.tokenBias = changingBans(model, TokenBias, options.tokenBias instanceof TokenBias ? options.tokenBias : undefined, () => {
            const generated = history().generated;
            // Until minTokens are generated, the end-of-generation tokens and the stop tokens are banned (vLLM's min_tokens).
            const bans = generated.length < minTokens ? [...endTokens(), ...request.stopTokenIds ?? []] as Token[] : [];
            return badWords === undefined ? bans : bans.concat(badWords.bannedAfter(generated));
        });
    return options;
}

/**
 * A bias read at each token: `open` (the request's logit_bias, if any) with the tokens `bans` gives then banned. The
 * last one built is reused while the bans stay the same, which they mostly do.
 */
function changingBans(model: LlamaModel, TokenBias: TokenBiasClass, open: InstanceType<TokenBiasClass> | undefined,
                      bans: () => readonly Token[]): () => InstanceType<TokenBiasClass> {
    const unbanned = open ?? new TokenBias(model.tokenizer);
    let lastKey = "";
    let last = unbanned;
    return () => {
        const banned = bans();
        if (banned.length === 0)
            return unbanned;
        const key = banned.join(",");
        if (key !== lastKey) {
            last = new TokenBias(model.tokenizer);
            const biases = biasesOf(last);
            for (const [token, value] of biasesOf(unbanned))
                biases.set(token, value);
            for (const token of banned)
                biases.set(token, -Infinity);
            lastKey = key;
        }
        return last;
    };
}

/**
 * A TokenBias's own map of token → logit bias, which node-llama-cpp hands to its native sampler as is.
 * Its `set` skips end-of-generation tokens (so that "never" cannot keep a generation from ending);
 * OpenAI's and llama.cpp's `logit_bias` apply to every token, and biasing EOS (to ban or to favour
 * ending) is a common use. node-llama-cpp is pinned to one version; the sampling-fields test fails
 * if the map stops being read.
 */
function biasesOf(bias: InstanceType<TokenBiasClass>): Map<Token, number> {
    const biases = (bias as unknown as {_biases?: unknown})._biases;
    if (!(biases instanceof Map))
        throw new Error("this node-llama-cpp's TokenBias has no bias map: logit_bias cannot be applied");
    return biases as Map<Token, number>;
}
