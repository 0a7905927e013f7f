/**
 * The engine's per-token log-probabilities in OpenAI's two response shapes: chat's list of tokens with
 * their bytes and alternatives, and completions' parallel arrays with each token's offset in the text.
 */
import type {TokenLogprob} from "../../../protocol/engineMessages.js";
import type {ChatLogprobs, CompletionLogprobs} from "../../../protocol/openaiApi.js";

const utf8 = (text: string): number[] => [...Buffer.from(text, "utf8")];

export function chatLogprobs(entries: readonly TokenLogprob[]): ChatLogprobs {
    return {content: entries.map((entry) => ({token: entry.token, logprob: entry.logprob, bytes: utf8(entry.token),
        top_logprobs: entry.top.map((top) => ({token: top.token, logprob: top.logprob, bytes: utf8(top.token)}))})), refusal: null};
}

/** `offset`: where the first of `entries` starts in the generated text (a stream's running count). */
export function completionLogprobs(entries: readonly TokenLogprob[], offset = 0): CompletionLogprobs {
    const textOffset: number[] = [];
    let at = offset;
    for (const entry of entries) {
        textOffset.push(at);
        at += entry.token.length;
    }
    return {tokens: entries.map((entry) => entry.token), token_logprobs: entries.map((entry) => entry.logprob),
        top_logprobs: entries.map((entry) => Object.fromEntries(entry.top.map((top) => [top.token, top.logprob]))),
        text_offset: textOffset};
}
