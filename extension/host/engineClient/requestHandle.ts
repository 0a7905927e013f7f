import type {FinishReason} from "../../../protocol/engineMessages.js";

/** Lifecycle timestamps of one request, all on the host's clock (engine times corrected by the measured offset). */
export type RequestTimings = {
    arrival: number,
    inputProcessed?: number,
    queued?: number,
    scheduled?: number,
    firstToken?: number,
    lastToken?: number,
    finished: number,
    /** When the host received the first and last chunk of output. */
    firstDelivered?: number,
    lastDelivered: number
};

export type RequestResult = {
    id: string,
    text: string,
    reason: FinishReason,
    error?: string,
    promptTokens: number,
    generatedTokens: number,
    preemptions: number,
    timings: RequestTimings,
    /** Host-clock time each generated token was sampled. */
    tokenTimes: number[],
    /** Host-clock time each chunk was delivered to the host, with its token count. */
    deliveries: Array<{t: number, tokens: number}>
};

export type TextChunk = {text: string, tokens: number, deliveredAt: number};

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
