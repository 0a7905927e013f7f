/**
 * llama.cpp's server's measurements in answers (protocol/llamaCppMeasures.ts) from what this server measures: a request's
 * `timings` from its lifecycle, its `prompt_progress` from the engine's prompt progress.
 */
import type {LlamaPromptProgress, LlamaTimings} from "../../../protocol/llamaCppMeasures.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import type {PromptProgress, TextChunk} from "../engineClient/outputProcessor.js";

export function llamaPromptProgress(progress: PromptProgress): {prompt_progress: LlamaPromptProgress} {
    // llama-server's `time_ms` is whole milliseconds, cut (not rounded) from its microseconds.
    return {prompt_progress: {total: progress.total, cache: progress.cached, processed: progress.processed,
        time_ms: Math.floor(progress.elapsedMs)}};
}

const perSecond = (count: number, ms: number): number => ms > 0 ? count / ms * 1000 : 0;

type Measured = Pick<RequestLifecycle, "scheduled" | "firstToken" | "lastToken" | "finished" | "promptTokens" | "cachedTokens" |
    "generatedTokens">;

/**
 * A request's `timings`, so far while it runs: the prompt is scheduled → first token, over the prompt tokens the prefix
 * cache did not hold (0 until the first token); the generation is first → last token.
 */
export function llamaTimings(request: Measured): LlamaTimings {
    const {scheduled, firstToken, lastToken, finished} = request;
    const promptDone = firstToken !== undefined || finished !== undefined;
    const promptN = promptDone ? request.promptTokens - request.cachedTokens : 0;
    // Nothing generated (n_predict 0): the prompt's evaluation ran to the finish.
    const promptMs = scheduled === undefined || !promptDone ? 0 : (firstToken ?? finished!) - scheduled;
    const predictedMs = firstToken !== undefined && lastToken !== undefined ? lastToken - firstToken : 0;
    return {
        cache_n: request.cachedTokens,
        prompt_n: promptN, prompt_ms: promptMs, prompt_per_token_ms: promptN > 0 ? promptMs / promptN : 0,
        prompt_per_second: perSecond(promptN, promptMs),
        predicted_n: request.generatedTokens, predicted_ms: predictedMs,
        predicted_per_token_ms: request.generatedTokens > 0 ? predictedMs / request.generatedTokens : 0,
        predicted_per_second: perSecond(request.generatedTokens, predictedMs)
    };
}

/**
 * A stream's `timings` so far (`timings_per_token`): as of the last piece it took, not of the request's live lifecycle,
 * which runs ahead of what the stream has sent (its later tokens may be in, not yet sent).
 */
export class StreamTimings {
    private generated = 0;
    private lastToken: number | undefined;

    constructor(private readonly lifecycle: Readonly<RequestLifecycle>) {}

    /** A piece the stream takes. */
    add(piece: TextChunk): void {
        this.generated += piece.tokens;
        this.lastToken = piece.lastTokenAt ?? this.lastToken;
    }

    now(): LlamaTimings {
        const {scheduled, firstToken, finished, promptTokens, cachedTokens} = this.lifecycle;
        return llamaTimings({scheduled, firstToken, finished, promptTokens, cachedTokens, generatedTokens: this.generated,
            lastToken: this.lastToken});
    }
}
