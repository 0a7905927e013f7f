import type {TextChunk} from "./outputProcessor.js";
import type {RequestResult} from "./requestState.js";

/** One request in flight, as its caller sees it: streamed text, cancel, and the final result. */
export class RequestHandle implements AsyncIterable<TextChunk> {
    readonly done: Promise<RequestResult>;
    private resolveDone!: (result: RequestResult) => void;
    private readonly buffered: TextChunk[] = [];
    private waiter: (() => void) | undefined;
    private ended = false;
    private readonly chunkListeners: Array<(chunk: TextChunk) => void> = [];

    constructor(readonly id: string, private readonly cancelRequest: (id: string) => void) {
        this.done = new Promise((resolve) => {
            this.resolveDone = resolve;
        });
    }

    cancel(): void {
        if (!this.ended)
            this.cancelRequest(this.id);
    }

    onChunk(listener: (chunk: TextChunk) => void): void {
        this.chunkListeners.push(listener);
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
