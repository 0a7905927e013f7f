import type {PromptLogprobs} from "../../../protocol/engineMessages.js";
import type {TextChunk} from "./outputProcessor.js";
import type {RequestResult} from "./requestState.js";

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
    private queuedPromptTokens: number | undefined;
    private queuedPromptTokenIds: number[] | undefined;
    private scoredPrompt: PromptLogprobs | undefined;

    constructor(readonly id: string, private readonly cancelRequest: (id: string) => void) {
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
