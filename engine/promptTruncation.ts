/**
 * vLLM's `truncate_prompt_tokens`: only a prompt's last N tokens are evaluated. A prompt the engine rendered (text,
 * chat) keeps the BOS it begins with, counted in the N, as Hugging Face's truncation keeps the special tokens it adds;
 * token ids given as the prompt are cut as given, as vLLM cuts them.
 */
import type {Token} from "./llamaTypes.js";

/** `tokens` cut to their last `keep` (≥ 1); `bos`: the BOS a rendered prompt begins with, kept first; undefined: none. */
export function truncatePrompt(tokens: readonly Token[], keep: number, bos: Token | undefined): Token[] {
    if (tokens.length <= keep)
        return [...tokens];
    if (bos !== undefined && tokens[0] === bos)
        return [bos, ...tokens.slice(tokens.length - (keep - 1))];
    return tokens.slice(tokens.length - keep);
}
