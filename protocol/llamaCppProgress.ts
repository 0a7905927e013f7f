/**
 * llama.cpp's server's prompt progress (`return_progress: true` with `stream`): before the first token, streamed chunks
 * that say how far the prompt's evaluation is. `processed` counts the prompt tokens in the sequence's KV cache so far,
 * the `cache`d prefix included, out of `total`; `time_ms` since the evaluation started. The same field rides each
 * endpoint's own chunk shape: `/completion`'s piece, `/v1/completions`' and `/v1/chat/completions`' chunks.
 */
export type LlamaPromptProgress = {total: number, cache: number, processed: number, time_ms: number};

/** The chunk field. */
export type PromptProgressField = {prompt_progress?: LlamaPromptProgress};
