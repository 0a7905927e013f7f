/** A request's prompt progress (the engine's, PromptProgress) as llama.cpp's server streams it (`return_progress`). */
import type {LlamaPromptProgress} from "../../../protocol/llamaCppProgress.js";
import type {PromptProgress} from "../engineClient/outputProcessor.js";

export function llamaPromptProgress(progress: PromptProgress): {prompt_progress: LlamaPromptProgress} {
    // llama-server's `time_ms` is whole milliseconds, cut (not rounded) from its microseconds.
    return {prompt_progress: {total: progress.total, cache: progress.cached, processed: progress.processed,
        time_ms: Math.floor(progress.elapsedMs)}};
}
