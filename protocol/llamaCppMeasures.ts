/**
 * llama.cpp's server's measurements in its answers, on every endpoint it serves (`/completion`, `/v1/completions`,
 * `/v1/chat/completions`), each in that endpoint's own shape:
 * - `timings`: the request's prompt evaluation and generation (counts, milliseconds, rates), in a whole answer and a
 *   stream's last chunk; with `timings_per_token: true` in every streamed chunk, so far.
 * - `prompt_progress` (`return_progress: true` with `stream`): before the first token, chunks that say how far the
 *   prompt's evaluation is. `processed` counts the prompt tokens in the sequence's KV cache so far, the `cache`d prefix
 *   included, out of `total`; `time_ms` since the evaluation started.
 */

/** The prompt: `cache_n` found cached, `prompt_n` evaluated; the generation: `predicted_n` tokens. */
export type LlamaTimings = {
    cache_n: number,
    prompt_n: number, prompt_ms: number, prompt_per_token_ms: number, prompt_per_second: number,
    predicted_n: number, predicted_ms: number, predicted_per_token_ms: number, predicted_per_second: number
};

export type LlamaPromptProgress = {total: number, cache: number, processed: number, time_ms: number};

/** The fields on an answer or a chunk. */
export type LlamaMeasureFields = {timings?: LlamaTimings, prompt_progress?: LlamaPromptProgress};

/**
 * The token counts in llama.cpp's `timings` on a streamed chunk or an answer (a client reading it: the monitoring
 * proxy): the prompt is what was found cached plus what was evaluated. Undefined where there are none; llama.cpp's
 * server and ours send them on the last chunk even when the client did not ask for `usage`.
 */
export function llamaTimingsCounts(value: unknown): {promptTokens: number, completionTokens: number} | undefined {
    if (typeof value !== "object" || value === null || !("timings" in value))
        return undefined;
    const timings: unknown = value.timings;
    if (typeof timings !== "object" || timings === null)
        return undefined;
    const {cache_n: cached, prompt_n: evaluated, predicted_n: predicted} = timings as Partial<Record<string, unknown>>;
    const count = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
    if (!count(evaluated) || !count(predicted) || (cached !== undefined && !count(cached)))
        return undefined;
    return {promptTokens: (cached ?? 0) + evaluated, completionTokens: predicted};
}
