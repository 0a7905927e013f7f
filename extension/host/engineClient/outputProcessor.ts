import type {FinishReason, PromptLogprobs, RequestEvent, StepStats, TokenLogprob} from "../../../protocol/engineMessages.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import {emptyIteration, type EngineStep} from "./engineStep.js";
import {RequestState, type RequestResult} from "./requestState.js";

/**
 * A piece of one request's streamed text as delivered to the host; `reasoning`, the model's reasoning apart from its
 * answer's `text` (GenerateRequest.separateReasoning); `logprobs`, one per token, when the request asked for them.
 */
export type TextChunk = {text: string, reasoning?: string, tokens: number, deliveredAt: number, logprobs?: TokenLogprob[], ids?: number[],
    /** When its last token was sampled (host clock); absent for a chunk of no token. */
    lastTokenAt?: number};

/**
 * How far a request's prompt is evaluated (llama-server's `prompt_progress`): `processed` of its `total` prompt tokens are
 * in its sequence's KV cache, `cached` of them found there; `elapsedMs` since it was scheduled (host clock).
 */
export type PromptProgress = {total: number, cached: number, processed: number, elapsedMs: number};

export type OutputProcessorHooks = {
    /**
     * A request's prompt progressed: when it is scheduled (the cached prefix), after each chunk of a prompt evaluated in
     * chunks, and at its first token (all of it), before that token's chunk.
     */
    onPromptProgress?: (id: string, progress: PromptProgress) => void,
    /** The engine accepted a request into its waiting queue (its input was processed and it fits). */
    onQueued?: (id: string, promptTokens: number, promptTokenIds: number[] | undefined) => void,
    /** A scored prompt's log-probabilities (before the request's first chunk). */
    onPromptLogprobs?: (id: string, scores: PromptLogprobs) => void,
    /** A request's new text (called for every tokens event, in order). */
    onChunk?: (id: string, chunk: TextChunk) => void,
    /** A request ended; called once per request, after its last chunk. */
    onFinished?: (id: string, result: RequestResult) => void
};

/**
 * The host's requests in flight (vLLM's `OutputProcessor`): turns each outputs message of the engine
 * into the requests' lifecycles, their streamed text, and one EngineStep for the observers. Engine
 * times are moved onto the host clock here, once.
 */
export class OutputProcessor {
    private readonly states = new Map<string, RequestState>();

    constructor(private readonly hooks: OutputProcessorHooks = {}) {}

    get inFlightCount(): number {
        return this.states.size;
    }

    has(id: string): boolean {
        return this.states.has(id);
    }

    /** Requests in flight that no sequence has taken yet (input processing or waiting; not preempted ones). */
    get waitingCount(): number {
        let waiting = 0;
        for (const state of this.states.values())
            if (state.lifecycle.phase === "input" || state.lifecycle.phase === "waiting") waiting++;
        return waiting;
    }

    /** A request entered the host; returns the step that announces it. */
    arrive(id: string, client: string, t: number, priority: number, maxTokens: number): EngineStep {
        if (this.states.has(id))
            throw new Error(`duplicate request id ${JSON.stringify(id)}: it is still in flight`);
        const state = new RequestState(id, client, t, priority, maxTokens);
        this.states.set(id, state);
        const iteration = emptyIteration(t);
        iteration.arrived.push(state.lifecycle);
        iteration.updated.push(state.lifecycle);
        return {iteration};
    }

    /**
     * One outputs message. `toHost` is added to engine times (host clock − engine clock). Events of
     * requests not in flight are skipped and their ids returned.
     */
    process(events: readonly RequestEvent[], stats: StepStats | undefined, toHost: number, receivedAt: number):
    {step: EngineStep, unknownIds: string[]} {
        const iteration = emptyIteration(receivedAt);
        const unknownIds: string[] = [];
        for (const event of events) {
            const state = this.states.get(event.id);
            if (state === undefined) {
                unknownIds.push(event.id);
                continue;
            }
            const hostEvent = toHost === 0 ? event : onHostClock(event, toHost);
            if (!iteration.updated.includes(state.lifecycle))
                iteration.updated.push(state.lifecycle);
            const prefilling = state.lifecycle.firstToken === undefined;
            state.apply(hostEvent, receivedAt, iteration);
            if (prefilling && this.hooks.onPromptProgress !== undefined)
                this.promptProgress(state.lifecycle, hostEvent, this.hooks.onPromptProgress);
            if (hostEvent.kind === "tokens")
                this.hooks.onChunk?.(event.id, {text: hostEvent.text,
                    ...hostEvent.reasoning !== undefined ? {reasoning: hostEvent.reasoning} : {},
                    tokens: hostEvent.times.length, deliveredAt: receivedAt,
                    ...hostEvent.times.length > 0 ? {lastTokenAt: hostEvent.times[hostEvent.times.length - 1]} : {},
                    ...(hostEvent.logprobs !== undefined ? {logprobs: hostEvent.logprobs} : {}),
                    ...(hostEvent.ids !== undefined ? {ids: hostEvent.ids} : {})});
            else if (hostEvent.kind === "promptLogprobs")
                this.hooks.onPromptLogprobs?.(event.id, {first: hostEvent.first, logprobs: hostEvent.logprobs});
            else if (hostEvent.kind === "queued")
                this.hooks.onQueued?.(event.id, state.lifecycle.promptTokens, state.promptTokenIds);
            else if (hostEvent.kind === "finished")
                this.end(state);
        }
        const step: EngineStep = {iteration};
        if (stats !== undefined)
            step.scheduler = toHost === 0 ? stats : {...stats, t: stats.t + toHost};
        return {step, unknownIds};
    }

    /** Ends requests on the host side (the engine never got them, or is gone); undefined when none was in flight. */
    finishLocally(ids: readonly string[], reason: FinishReason, error: string, t: number): EngineStep | undefined {
        const iteration = emptyIteration(t);
        for (const id of ids) {
            const state = this.states.get(id);
            if (state === undefined)
                continue;
            const lifecycle = state.lifecycle;
            iteration.updated.push(lifecycle);
            state.finish({t, receivedAt: t, reason, promptTokens: lifecycle.promptTokens, generatedTokens: state.tokenTimes.length, error},
                iteration);
            this.end(state);
        }
        return iteration.finished.length === 0 ? undefined : {iteration};
    }

    /** Every request in flight, for `finishLocally` when the engine is gone. */
    inFlightIds(): string[] {
        return [...this.states.keys()];
    }

    /** `event`, applied to a request whose prompt was being evaluated, as prompt progress (when it is any). */
    private promptProgress(lifecycle: RequestLifecycle, event: RequestEvent, report: (id: string, progress: PromptProgress) => void): void {
        const {scheduled, promptTokens: total, cachedTokens: cached} = lifecycle;
        if (scheduled === undefined)
            return;
        const at = (processed: number, t: number): void =>
            report(lifecycle.id, {total, cached, processed, elapsedMs: Math.max(0, t - scheduled)});
        if (event.kind === "scheduled")
            at(cached, event.t);
        else if (event.kind === "prefilled")
            at(event.processedTokens, event.t);
        else if (event.kind === "tokens" && lifecycle.firstToken !== undefined)
            at(total, lifecycle.firstToken);
    }

    private end(state: RequestState): void {
        this.states.delete(state.lifecycle.id);
        this.hooks.onFinished?.(state.lifecycle.id, state.result());
    }
}

function onHostClock(event: RequestEvent, toHost: number): RequestEvent {
    if (event.kind === "tokens")
        return {...event, times: event.times.map((t) => t + toHost)};
    return {...event, t: event.t + toHost};
}
