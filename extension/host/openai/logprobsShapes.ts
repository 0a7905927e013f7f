/**
 * The engine's per-token log-probabilities in OpenAI's two response shapes: chat's list of tokens with
 * their bytes and alternatives, and completions' parallel arrays with each token's offset in the text; a scored
 * prompt's also in vLLM's `prompt_logprobs` shape.
 */
import type {PromptLogprobs, TokenLogprob} from "../../../protocol/engineMessages.js";
import type {ApiPromptLogprobs, ApiPromptTokenLogprob, ChatLogprobs, CompletionLogprobs} from "../../../protocol/openaiApi.js";

/** A token's text as the bytes the answers list with it (OpenAI's `bytes`, llama-server's). */
export const utf8 = (text: string): number[] => [...Buffer.from(text, "utf8")];

export function chatLogprobs(entries: readonly TokenLogprob[]): ChatLogprobs {
    return {content: entries.map((entry) => ({token: entry.token, logprob: entry.logprob, bytes: utf8(entry.token),
        top_logprobs: entry.top.map((top) => ({token: top.token, logprob: top.logprob, bytes: utf8(top.token)}))})), refusal: null};
}

/**
 * `offset`: where the first of `entries` starts in the text (a stream's running count). `prompt`: an echoed prompt's
 * scores, which come first; its first token has no log-probability (null, as OpenAI's echo reports it).
 */
export function completionLogprobs(entries: readonly TokenLogprob[], offset = 0, prompt?: PromptLogprobs): CompletionLogprobs {
    const shape: CompletionLogprobs = {tokens: [], token_logprobs: [], top_logprobs: [], text_offset: []};
    let at = offset;
    const add = (token: string, logprob: number | null, top: TokenLogprob["top"] | null): void => {
        shape.tokens.push(token);
        shape.token_logprobs.push(logprob);
        shape.top_logprobs.push(top === null ? null : Object.fromEntries(top.map((other) => [other.token, other.logprob])));
        shape.text_offset.push(at);
        at += token.length;
    };
    if (prompt !== undefined)
        add(prompt.first, null, null);
    for (const entry of [...prompt?.logprobs ?? [], ...entries])
        add(entry.token, entry.logprob, entry.top);
    return shape;
}

/** A scored prompt with at most `top` alternatives per token (the engine scored it with the most any answer asked for). */
export function withTop(scores: PromptLogprobs, top: number): PromptLogprobs {
    return {first: scores.first, logprobs: scores.logprobs.map((entry) => ({...entry, top: entry.top.slice(0, top)}))};
}

/**
 * vLLM's `prompt_logprobs` of a scored prompt: null for its first token, then per token the token's own entry and its
 * `top` most likely alternatives' (ranks 1, 2, …), keyed by token id. vLLM lists the prompt's token first; here the
 * keys are ids, which JSON objects built in JavaScript order by number (a client reads them by key).
 */
export function vllmPromptLogprobs(scores: PromptLogprobs, top: number): ApiPromptLogprobs {
    return [null, ...scores.logprobs.map((entry) => {
        const entries: Record<string, ApiPromptTokenLogprob> = {};
        if (entry.id !== undefined)
            entries[entry.id] = {logprob: entry.logprob, rank: entry.rank ?? null, decoded_token: entry.token};
        for (const [i, alternative] of entry.top.slice(0, top).entries())
            if (alternative.id !== undefined)
                entries[alternative.id] ??= {logprob: alternative.logprob, rank: i + 1, decoded_token: alternative.token};
        return entries;
    })];
}
