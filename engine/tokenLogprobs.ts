/**
 * A generated token's log-probability and its most likely alternatives, from the probabilities
 * node-llama-cpp's sampler returns when asked: the candidates left after the sampling chain (top-k,
 * top-p, min-p, temperature; all tokens at temperature 0), most likely first, softmaxed.
 */
import {minLogprob, type TokenLogprob} from "../protocol/engineMessages.js";
import type {LlamaModel, Token} from "./llamaTypes.js";

function logOf(probability: number | undefined): number {
    return probability === undefined || probability <= 0 ? minLogprob : Math.max(minLogprob, Math.log(probability));
}

/**
 * `token`'s entry with `top` alternatives, each with its token id (llama.cpp's `n_probs` answers name them);
 * `probabilities` undefined (none returned) reads as impossible. Each token's
 * text is detokenized after `context` (a neutral token), so that a SentencePiece piece keeps its leading space, which
 * detokenizing it alone drops: the pieces then join into the output's text, as OpenAI's do. `specialTokens`: special
 * tokens' text (BOS, markup) is written out, as for a prompt's tokens; else dropped, as in generated text.
 */
export function tokenLogprob(model: LlamaModel, token: Token, probabilities: ReadonlyMap<Token, number> | undefined,
                             top: number, context: readonly Token[], specialTokens = false): TokenLogprob {
    const alternatives: TokenLogprob["top"] = [];
    if (probabilities !== undefined && top > 0)
        for (const [candidate, probability] of probabilities) {
            alternatives.push({token: model.detokenize([candidate], specialTokens, context), logprob: logOf(probability), id: candidate});
            if (alternatives.length >= top)
                break;
        }
    return {token: model.detokenize([token], specialTokens, context), logprob: logOf(probabilities?.get(token)), top: alternatives,
        id: token};
}

/**
 * A scored prompt token's entry (GenerateRequest.promptLogprobs): {@link tokenLogprob} with special tokens' text, plus
 * the token's rank in the model's distribution (1: the most likely; its place in `probabilities`,
 * which the scoring's greedy evaluation gives for the whole vocabulary, most likely first), as vLLM's `prompt_logprobs`
 * report them.
 */
export function scoredPromptTokenLogprob(model: LlamaModel, token: Token, probabilities: ReadonlyMap<Token, number> | undefined,
                                         top: number, context: readonly Token[]): TokenLogprob {
    const entry = tokenLogprob(model, token, probabilities, top, context, true);
    let rank: number | undefined;
    if (probabilities !== undefined) {
        let place = 0;
        for (const candidate of probabilities.keys()) {
            place++;
            if (candidate === token) {
                rank = place;
                break;
            }
        }
    }
    return {...entry, ...rank !== undefined ? {rank} : {}};
}
