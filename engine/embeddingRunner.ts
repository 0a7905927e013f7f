/**
 * Embed requests: the model's pooled hidden state for an input, on an embedding context of its own (node-llama-cpp's
 * LlamaEmbeddingContext; created at the first request, sized like one generation sequence), one request at a time,
 * in arrival order. Each is a request like the others: `inputProcessed`, `queued`, `scheduled` when its evaluation
 * starts, `finished` with the vector. A generation running meanwhile shares the CPU (or GPU) with it.
 */
import {nowMs} from "../common/clock.js";
import {errorMessage} from "../common/errorMessage.js";
import type {EmbedRequest, RequestErrorCode, RequestEvent} from "../protocol/engineMessages.js";
import type {LlamaModel, Token} from "./llamaTypes.js";
import {outOfVocabulary} from "./vocabularyCheck.js";

type EmbeddingContext = Awaited<ReturnType<LlamaModel["createEmbeddingContext"]>>;
/** `evaluated`: the input's tokens with those node-llama-cpp adds (the request's prompt tokens). */
type Job = {id: string, tokens: Token[], evaluated: number};

export class EmbeddingRunner {
    private context: Promise<EmbeddingContext> | undefined;
    /** Requests are accepted in arrival order (the first waits for the context to be created). */
    private intake: Promise<void> = Promise.resolve();
    private readonly accepting = new Set<string>();
    private readonly waiting: Job[] = [];
    private running: Job | undefined;
    private disposed = false;

    constructor(
        private readonly model: LlamaModel,
        /** The most tokens one input may have (a generation sequence's context). */
        private readonly contextSize: number,
        private readonly threads: number,
        private readonly vocabularySize: number | undefined,
        private readonly emit: (event: RequestEvent) => void
    ) {}

    get runningCount(): number {
        return this.running === undefined ? 0 : 1;
    }

    get waitingCount(): number {
        return this.waiting.length;
    }

    has(id: string): boolean {
        return this.accepting.has(id) || this.running?.id === id || this.waiting.some((job) => job.id === id);
    }

    /** Tokenizes, checks and queues one request (in arrival order); refusals finish it. */
    submit(request: EmbedRequest): void {
        this.accepting.add(request.id);
        this.intake = this.intake.then(() => this.accept(request)).finally(() => this.accepting.delete(request.id));
    }

    private async accept(request: EmbedRequest): Promise<void> {
        const fail = (message: string, code: RequestErrorCode, promptTokens = 0): void =>
            this.emit({kind: "finished", id: request.id, t: nowMs(), reason: "error", promptTokens, generatedTokens: 0, error: message, errorCode: code});
        if (this.disposed)
            return this.emit({kind: "finished", id: request.id, t: nowMs(), reason: "abort", promptTokens: 0, generatedTokens: 0});
        let tokens: Token[];
        let context: EmbeddingContext;
        try {
            // Special tokens' text read as those tokens, as llama.cpp's server reads an input.
            tokens = request.tokens !== undefined ? request.tokens as Token[] : this.model.tokenize(request.text ?? "", true);
            context = await this.contextReady();
        } catch (error) {
            return fail(`could not process input: ${errorMessage(error)}`, "engine_error");
        }
        const refused = outOfVocabulary(tokens, this.vocabularySize);
        if (refused !== undefined)
            return fail(refused, "invalid_request");
        if (tokens.length === 0)
            return fail("the input is empty", "invalid_request");
        // What is evaluated: with the beginning / end tokens node-llama-cpp adds where the vocabulary asks for them.
        const added = context.calculateInputLength(tokens) - tokens.length;
        const room = this.contextSize - 1 - added;
        if (tokens.length > room) {
            if (request.truncate !== true)
                return fail(`this model's context holds ${this.contextSize} tokens, but the input has ${tokens.length + added}`,
                    "context_length_exceeded", tokens.length + added);
            tokens = tokens.slice(0, room);
        }
        this.emit({kind: "inputProcessed", id: request.id, t: nowMs(), promptTokens: tokens.length + added});
        this.waiting.push({id: request.id, tokens, evaluated: tokens.length + added});
        this.emit({kind: "queued", id: request.id, t: nowMs()});
        void this.next();
    }

    /** The embedding context, created at the first call; one that failed to be created is tried again next time. */
    private contextReady(): Promise<EmbeddingContext> {
        if (this.context === undefined) {
            const created = this.model.createEmbeddingContext({contextSize: this.contextSize, threads: this.threads});
            this.context = created;
            created.catch(() => {
                if (this.context === created)
                    this.context = undefined;
            });
        }
        return this.context;
    }

    /** A waiting request is removed (finished as abort); a running one completes (an embedding takes one evaluation). */
    cancel(id: string): boolean {
        const index = this.waiting.findIndex((job) => job.id === id);
        if (index < 0)
            return this.running?.id === id;
        const [job] = this.waiting.splice(index, 1);
        this.emit({kind: "finished", id, t: nowMs(), reason: "abort", promptTokens: job!.evaluated, generatedTokens: 0});
        return true;
    }

    private async next(): Promise<void> {
        if (this.running !== undefined || this.disposed)
            return;
        const job = this.waiting.shift();
        if (job === undefined)
            return;
        this.running = job;
        this.emit({kind: "scheduled", id: job.id, t: nowMs(), cachedTokens: 0});
        try {
            const {vector} = await (await this.contextReady()).getEmbeddingFor(job.tokens);
            this.emit({kind: "finished", id: job.id, t: nowMs(), reason: "stop", promptTokens: job.evaluated, generatedTokens: 0,
                embedding: Array.from(vector)});
        } catch (error) {
            this.emit({kind: "finished", id: job.id, t: nowMs(), reason: "error", promptTokens: job.evaluated, generatedTokens: 0,
                error: `could not compute the embedding: ${errorMessage(error)}`, errorCode: "engine_error"});
        } finally {
            this.running = undefined;
            void this.next();
        }
    }

    async dispose(): Promise<void> {
        this.disposed = true;
        for (const job of this.waiting.splice(0))
            this.emit({kind: "finished", id: job.id, t: nowMs(), reason: "abort", promptTokens: job.evaluated, generatedTokens: 0,
                error: "engine shutting down"});
        const context = this.context;
        this.context = undefined;
        await context?.then((ready) => ready.dispose(), () => undefined);
    }
}
