/**
 * THE lifecycle of one request, declared once. The host builds it from the engine's lifecycle events
 * (extension/host/engineClient/requestState.ts); the same object is a request's result (with its
 * text), StatsManager's ledger entry, the panel's waterfall row and an export row.
 *
 * Timestamps are epoch milliseconds on the host clock (engine times moved by the measured offset);
 * derived durations are seconds, as vLLM's metrics (see DESIGN: "Lifecycle and metric definitions").
 */
import type {FinishReason, RequestErrorCode} from "./engineMessages.js";

/** At most this many characters in a client label. */
export const maxClientLabelLength = 64;

export type RequestPhase = "input" | "waiting" | "running" | "preempted" | "finished";

/** Derived per-request metrics (seconds), present once both ends of the interval are known. */
export type RequestMetrics = {
    /** First tokens delivered to the host − arrival. */
    ttftS?: number,
    /** Finish delivered to the host − arrival. */
    e2eS?: number,
    /** scheduled − queued. */
    queueS?: number,
    /** firstToken − scheduled. */
    prefillS?: number,
    /** lastToken − firstToken. */
    decodeS?: number,
    /** lastToken − scheduled. */
    inferenceS?: number,
    /** decode / (generated − 1); only when at least 2 tokens were generated. */
    tpotS?: number
};

export type RequestLifecycle = {
    id: string,
    /**
     * Who sent it: the API client (`openai-js`, `curl`, `Continue`, an API key's name …) or the
     * product's own sender (`send-prompt`, `bench`, `demo`). At most `maxClientLabelLength` characters.
     */
    client: string,
    phase: RequestPhase,
    priority: number,
    /** The request's `maxTokens` parameter. */
    maxTokens: number,
    /** When the request entered the host (vLLM's `arrival_time`). */
    arrival: number,
    inputProcessed?: number,
    queued?: number,
    /** The first schedule only (a resume after preemption is not a new one, as in vLLM). */
    scheduled?: number,
    firstToken?: number,
    lastToken?: number,
    /** When the host received the first output carrying tokens. */
    firstDelivered?: number,
    /** Engine time of the finish. */
    finished?: number,
    /** When the host received the finish (the last delivery). */
    lastDelivered?: number,
    /** Engine times of preemptions (at most the first 100). */
    preemptions: number[],
    reason?: FinishReason,
    error?: string,
    /** With `error`: whose fault it was (a bad request, a too-long one, or the engine). */
    errorCode?: RequestErrorCode,
    promptTokens: number,
    /**
     * Leading prompt tokens found in the KV cache of the sequence the request was first scheduled on
     * (prefix caching), so not evaluated again: vLLM's `num_cached_tokens`. 0 until scheduled, and
     * when caching is off.
     */
    cachedTokens: number,
    /**
     * Of `cachedTokens`, those restored from the engine's prompt cache (a saved sequence state) rather than found on the
     * sequence; absent when the engine has no prompt cache (and until scheduled).
     */
    restoredTokens?: number,
    /**
     * While its prompt is evaluated in chunks (chunked prefill): the prompt tokens its sequence holds so far, the cached
     * prefix included (llama-server's prompt progress). Absent for a prompt evaluated in one go; the first token ends it.
     */
    prefilledTokens?: number,
    /** The engine sequence it runs on, or last ran on (0 … parallel − 1; llama.cpp's slot id); absent until scheduled. */
    sequence?: number,
    generatedTokens: number,
    metrics: RequestMetrics
};
