import type {PromptLogprobs} from "../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import type {PromptProgress, TextChunk} from "./outputProcessor.js";
import type {RequestResult} from "./requestState.js";

/** At most this many progress reports wait for a first listener. */
const maxEarlyProgress = 1024;

/** One request in flight, as its caller sees it: streamed text, cancel, and the final result. */
export class RequestHandle implements AsyncIterable<TextChunk> {
    readonly done: Promise<RequestResult>;
    /**
     * Resolves true once the engine has queued the request (its input was processed and it fits the
     * context), false when it ended before that (refused, failed, cancelled). A server answers with
     * its status line only then, so a refused request gets a proper error status even when streaming.
     */
    readonly queued: Promise<boolean>;
    private resolveDone!: (result: RequestResult) => void;
    private resolveQueued!: (queued: boolean) => void;
    private readonly buffered: TextChunk[] = [];
    private waiter: (() => void) | undefined;
    private ended = false;
    private readonly chunkListeners: Array<(chunk: TextChunk) => void> = [];
    private readonly progressListeners: Array<(progress: PromptProgress) => void> = [];
    /** Progress reported before anyone listened (the engine's `queued` and `scheduled` often come in one message). */
    private earlyProgress: PromptProgress[] | undefined = [];
    private queuedPromptTokens: number | undefined;
    private queuedPromptTokenIds: number[] | undefined;
    private scoredPrompt: PromptLogprobs | undefined;

    /**
     * `lifecycle`: the request's, live (the host updates it as the engine's events arrive; read it, never change it): what a
     * stream reports of the request so far (llama.cpp's `timings_per_token`).
     */
    constructor(readonly id: string, private readonly cancelRequest: (id: string) => void, readonly lifecycle: Readonly<RequestLifecycle>) {
        this.done = new Promise((resolve) => {
            this.resolveDone = resolve;
        });
        this.queued = new Promise((resolve) => {
            this.resolveQueued = resolve;
        });
    }

    cancel(): void {
        if (!this.ended)
            this.cancelRequest(this.id);
    }

    onChunk(listener: (chunk: TextChunk) => void): void {
        this.chunkListeners.push(listener);
    }

    /**
     * `listener` hears how far the prompt's evaluation is (OutputProcessorHooks.onPromptProgress), synchronously: a
     * stream that writes it at once writes it before the text that follows it. The first listener hears at once what
     * was reported before it (a stream starts once the request is queued, and it may be scheduled in the same message).
     */
    onPromptProgress(listener: (progress: PromptProgress) => void): void {
        this.progressListeners.push(listener);
        const early = this.earlyProgress;
        this.earlyProgress = undefined;
        for (const progress of early ?? [])
            listener(progress);
    }

    /** Called by EngineClient. */
    pushPromptProgress(progress: PromptProgress): void {
        // Kept for a first listener only while none has come, a few reports at most: one per prompt chunk evaluated meanwhile.
        if (this.earlyProgress !== undefined && this.earlyProgress.length < maxEarlyProgress)
            this.earlyProgress.push(progress);
        for (const listener of this.progressListeners)
            listener(progress);
    }

    /** The prompt's tokens, once the engine has queued the request (a streamed answer may report them before its first token). */
    get promptTokens(): number | undefined {
        return this.queuedPromptTokens;
    }

    /**
     * A request that asked for its prompt to be scored (GenerateRequest.promptLogprobs): the scores, once the prompt
     * was evaluated, which is before the first chunk arrives (and before `done` for a request that only scores).
     */
    get promptLogprobs(): PromptLogprobs | undefined {
        return this.scoredPrompt;
    }

    /** Called by EngineClient. */
    setPromptLogprobs(scores: PromptLogprobs): void {
        this.scoredPrompt = scores;
    }

    /** The prompt's token ids as evaluated, once queued, for a request that asked for ids (GenerateRequest.returnTokenIds). */
    get promptTokenIds(): number[] | undefined {
        return this.queuedPromptTokenIds;
    }

    /** Called by EngineClient when the engine queued the request. */
    markQueued(promptTokens: number, promptTokenIds?: number[]): void {
        this.queuedPromptTokens = promptTokens;
        this.queuedPromptTokenIds = promptTokenIds;
        this.resolveQueued(true);
    }

    /** Called by EngineClient. */
    pushChunk(chunk: TextChunk): void {
        for (const listener of this.chunkListeners)
            listener(chunk);
        this.buffered.push(chunk);
        this.wake();
    }

    /** Called by EngineClient, exactly once. */
    complete(result: RequestResult): void {
        if (this.ended)
            return;
        this.ended = true;
        this.resolveQueued(false);
        this.resolveDone(result);
        this.wake();
    }

    async *[Symbol.asyncIterator](): AsyncIterator<TextChunk> {
        while (true) {
            const chunk = this.buffered.shift();
            if (chunk !== undefined) {
                yield chunk;
                continue;
            }
            if (this.ended)
                return;
            await new Promise<void>((resolve) => {
                this.waiter = resolve;
            });
        }
    }

    private wake(): void {
        const waiter = this.waiter;
        this.waiter = undefined;
        waiter?.();
    }
}
