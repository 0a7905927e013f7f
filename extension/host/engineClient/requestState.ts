import type {FinishReason, GeneratedToolCall, PromptLogprobs, RequestErrorCode, RequestEvent, TokenLogprob} from "../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import type {IterationStats} from "./engineStep.js";

const maxPreemptionTimes = 100;
const maxErrorLength = 500;

/** A chunk of streamed output as the host delivered it. */
export type Delivery = {t: number, tokens: number};

/** A finished request: its final lifecycle plus what was generated. */
export type RequestResult = RequestLifecycle & {
    reason: FinishReason,
    finished: number,
    lastDelivered: number,
    text: string,
    /** Host-clock time each generated token was sampled. */
    tokenTimes: number[],
    /** Host-clock time each chunk was delivered to the host, with its token count. */
    deliveries: Delivery[],
    /** Each generated token's log-probability, when the request asked for them. */
    logprobs?: TokenLogprob[],
    /** The prompt's token ids as evaluated, and each generated token's id, when the request asked for them (returnTokenIds). */
    promptTokenIds?: number[],
    tokenIds?: number[],
    /** The prompt's scores, when the request asked for them (GenerateRequest.promptLogprobs). */
    promptLogprobs?: PromptLogprobs,
    /** The tool calls the engine parsed out of the output (not part of `text`), when the request offered tools. */
    toolCalls?: GeneratedToolCall[],
    /** The model's reasoning, apart from `text`, and how many of the generated tokens it took (a request whose reasoning was separated). */
    reasoning?: {text: string, tokens: number},
    /** The request's stop string that ended it, when one did; or the token of its stop ids (GenerateRequest.stopTokenIds). */
    stopString?: string,
    stopTokenId?: number,
    /** An embed request's vector (as the model pools it, not normalized). */
    embedding?: number[]
};

export type FinishInput = {
    t: number,
    receivedAt: number,
    reason: FinishReason,
    promptTokens: number,
    generatedTokens: number,
    error?: string,
    errorCode?: RequestErrorCode
};

const seconds = (later: number, earlier: number): number => (later - earlier) / 1000;

/**
 * One request in flight on the host (vLLM's `RequestState`): its lifecycle, built from the engine's
 * events already moved onto the host clock, and the text streamed so far. Each `apply` adds what the
 * event contributed to the step's IterationStats (the prefix-cache lookup at the first `scheduled`:
 * its prompt tokens queried, its cached tokens hit). Metrics (vLLM V1's definitions):
 * TTFT = first tokens delivered − arrival; ITL = gaps between token times; at the finish,
 * e2e = finish delivered − arrival, queue = scheduled − queued, prefill = firstToken − scheduled,
 * decode = lastToken − firstToken, inference = lastToken − scheduled, TPOT = decode / (generated − 1); an embedding's
 * prefill and inference = finish − scheduled (it has no tokens).
 */
export class RequestState {
    readonly lifecycle: RequestLifecycle;
    text = "";
    reasoning = "";
    readonly tokenTimes: number[] = [];
    readonly deliveries: Delivery[] = [];
    private logprobs: TokenLogprob[] | undefined;
    /** The prompt's token ids as evaluated, when the request asked for ids (from its `inputProcessed` event). */
    promptTokenIds: number[] | undefined;
    private tokenIds: number[] | undefined;
    private promptLogprobs: PromptLogprobs | undefined;
    private toolCalls: GeneratedToolCall[] | undefined;
    private reasoningTokens: number | undefined;
    private stopString: string | undefined;
    private stopTokenId: number | undefined;
    private embedding: number[] | undefined;

    constructor(id: string, client: string, arrival: number, priority: number, maxTokens: number) {
        this.lifecycle = {id, client, phase: "input", priority, maxTokens, arrival, preemptions: [], promptTokens: 0, cachedTokens: 0,
            generatedTokens: 0, metrics: {}};
    }

    /** Applies one event (times on the host clock, `receivedAt` its delivery) and records its contribution. */
    apply(event: RequestEvent, receivedAt: number, iteration: IterationStats): void {
        const lifecycle = this.lifecycle;
        switch (event.kind) {
            case "inputProcessed":
                lifecycle.inputProcessed = event.t;
                lifecycle.promptTokens = event.promptTokens;
                if (event.promptTokenIds !== undefined)
                    this.promptTokenIds = event.promptTokenIds;
                return;
            case "queued":
                lifecycle.queued ??= event.t;
                lifecycle.phase = "waiting";
                return;
            case "scheduled":
                if (lifecycle.scheduled === undefined) {
                    // The first schedule is the prefix-cache lookup (vLLM's num_cached_tokens is set once, too).
                    lifecycle.scheduled = event.t;
                    lifecycle.cachedTokens = event.cachedTokens;
                    if (event.restoredTokens !== undefined)
                        lifecycle.restoredTokens = event.restoredTokens;
                    iteration.prefixCacheRequests++;
                    iteration.prefixCacheQueries += lifecycle.promptTokens;
                    iteration.prefixCacheHits += event.cachedTokens - (event.restoredTokens ?? 0);
                    if (event.restoredTokens !== undefined) {
                        iteration.externalPrefixCacheRequests++;
                        iteration.externalPrefixCacheQueries += lifecycle.promptTokens;
                        iteration.externalPrefixCacheHits += event.restoredTokens;
                    }
                }
                if (event.sequence !== undefined)
                    lifecycle.sequence = event.sequence;
                lifecycle.phase = "running";
                return;
            case "prefilled":
                if (lifecycle.firstToken === undefined)
                    lifecycle.prefilledTokens = event.processedTokens;
                return;
            case "preempted":
                if (lifecycle.preemptions.length < maxPreemptionTimes)
                    lifecycle.preemptions.push(event.t);
                lifecycle.phase = "preempted";
                iteration.preemptions++;
                return;
            case "tokens":
                this.tokens(event.text, event.times, receivedAt, iteration);
                if (event.reasoning !== undefined)
                    this.reasoning += event.reasoning;
                if (event.logprobs !== undefined)
                    (this.logprobs ??= []).push(...event.logprobs);
                if (event.ids !== undefined)
                    (this.tokenIds ??= []).push(...event.ids);
                return;
            case "promptLogprobs":
                this.promptLogprobs = {first: event.first, logprobs: event.logprobs};
                return;
            case "finished":
                this.toolCalls = event.toolCalls;
                this.reasoningTokens = event.reasoningTokens;
                this.stopString = event.stopString;
                this.stopTokenId = event.stopTokenId;
                this.embedding = event.embedding;
                this.finish({t: event.t, receivedAt, reason: event.reason, promptTokens: event.promptTokens,
                    generatedTokens: event.generatedTokens, ...(event.error !== undefined ? {error: event.error} : {}),
                    ...(event.errorCode !== undefined ? {errorCode: event.errorCode} : {})}, iteration);
                return;
        }
    }

    /** Ends the request (from an engine event, or on the host: never reached the engine, engine gone). */
    finish(end: FinishInput, iteration: IterationStats): void {
        const lifecycle = this.lifecycle;
        delete lifecycle.prefilledTokens;
        lifecycle.phase = "finished";
        lifecycle.finished = end.t;
        lifecycle.lastDelivered = end.receivedAt;
        lifecycle.reason = end.reason;
        if (end.error !== undefined) {
            lifecycle.error = end.error.length > maxErrorLength ? `${end.error.slice(0, maxErrorLength)}…` : end.error;
            lifecycle.errorCode = end.errorCode ?? "engine_error";
        }
        lifecycle.promptTokens = end.promptTokens || lifecycle.promptTokens;
        lifecycle.generatedTokens = end.generatedTokens;

        const metrics = lifecycle.metrics;
        metrics.e2eS = seconds(end.receivedAt, lifecycle.arrival);
        const {queued, scheduled, firstToken, lastToken} = lifecycle;
        if (scheduled !== undefined && queued !== undefined)
            metrics.queueS = seconds(scheduled, queued);
        if (firstToken !== undefined && scheduled !== undefined)
            metrics.prefillS = seconds(firstToken, scheduled);
        if (lastToken !== undefined && firstToken !== undefined)
            metrics.decodeS = seconds(lastToken, firstToken);
        if (lastToken !== undefined && scheduled !== undefined)
            metrics.inferenceS = seconds(lastToken, scheduled);
        if (metrics.decodeS !== undefined && this.tokenTimes.length > 1)
            metrics.tpotS = metrics.decodeS / (this.tokenTimes.length - 1);
        // Nothing asked to be generated: the prompt evaluated (and maybe scored) only.
        const onlyPrefill = this.embedding !== undefined || (lifecycle.maxTokens === 0 && this.tokenTimes.length === 0);
        if (onlyPrefill && scheduled !== undefined) {
            // An embedding's evaluation is all prefill, as a prompt's that is only scored; its prompt tokens count when
            // it ends (there is no first token).
            metrics.prefillS = seconds(end.t, scheduled);
            metrics.inferenceS = metrics.prefillS;
            iteration.promptTokens += lifecycle.promptTokens;
        }
        iteration.finished.push(lifecycle);
    }

    /** The final result; call after `finish`. */
    result(): RequestResult {
        const lifecycle = this.lifecycle;
        if (lifecycle.reason === undefined || lifecycle.finished === undefined || lifecycle.lastDelivered === undefined)
            throw new Error(`request ${lifecycle.id} has not finished`);
        return {...lifecycle, reason: lifecycle.reason, finished: lifecycle.finished, lastDelivered: lifecycle.lastDelivered,
            text: this.text, tokenTimes: this.tokenTimes, deliveries: this.deliveries,
            ...(this.logprobs !== undefined ? {logprobs: this.logprobs} : {}),
            ...(this.promptTokenIds !== undefined ? {promptTokenIds: this.promptTokenIds} : {}),
            ...(this.promptTokenIds !== undefined || this.tokenIds !== undefined ? {tokenIds: this.tokenIds ?? []} : {}),
            ...(this.promptLogprobs !== undefined ? {promptLogprobs: this.promptLogprobs} : {}),
            ...(this.toolCalls !== undefined ? {toolCalls: this.toolCalls} : {}),
            ...(this.reasoningTokens !== undefined ? {reasoning: {text: this.reasoning, tokens: this.reasoningTokens}} : {}),
            ...(this.stopString !== undefined ? {stopString: this.stopString} : {}),
            ...(this.stopTokenId !== undefined ? {stopTokenId: this.stopTokenId} : {}),
            ...(this.embedding !== undefined ? {embedding: this.embedding} : {})};
    }

    private tokens(text: string, times: readonly number[], receivedAt: number, iteration: IterationStats): void {
        const lifecycle = this.lifecycle;
        this.text += text;
        this.deliveries.push({t: receivedAt, tokens: times.length});
        if (times.length === 0)
            return;
        let previous = lifecycle.lastToken;
        for (const time of times) {
            if (previous !== undefined) {
                iteration.itlS.push(seconds(time, previous));
                iteration.itlClients.push(lifecycle.client);
            }
            previous = time;
            this.tokenTimes.push(time);
        }
        lifecycle.firstToken ??= times[0];
        lifecycle.lastToken = times[times.length - 1];
        if (lifecycle.firstDelivered === undefined) {
            delete lifecycle.prefilledTokens;
            lifecycle.firstDelivered = receivedAt;
            lifecycle.metrics.ttftS = seconds(receivedAt, lifecycle.arrival);
            iteration.ttftS.push(lifecycle.metrics.ttftS);
            iteration.promptTokens += lifecycle.promptTokens;
        }
        lifecycle.generatedTokens = this.tokenTimes.length;
        iteration.generationTokens += times.length;
        lifecycle.phase = "running";
    }
}
