import type {FinishReason} from "../../../protocol/engineMessages.js";
import type {ArrivalEvent} from "../engineClient/hostRequestEvents.js";
import type {FinishedRequestStats} from "./loggers/statLogger.js";
import type {RequestRecord} from "../../../protocol/statsView.js";

const maxPreemptionTimes = 100;
const maxErrorLength = 500;

/** What a tokens event contributed: the derived values to record. */
export type TokensOutcome = {
    count: number,
    /** Seconds; present on the request's first tokens. */
    ttftS?: number,
    /** Prompt tokens to count now (the prefill is done), on the request's first tokens. */
    promptTokens: number,
    /** Gaps between consecutive token times, seconds. */
    itlS: number[]
};

export type FinishInput = {t: number, receivedAt: number, reason: FinishReason, promptTokens: number, generatedTokens: number, error?: string};

const seconds = (later: number, earlier: number): number => (later - earlier) / 1000;

/**
 * One request's lifecycle as the host saw it, and the vLLM V1 metrics derived from it:
 * TTFT = first tokens delivered − arrival; ITL = gaps between token times; at the finish,
 * e2e = finish delivered − arrival, queue = scheduled − queued, prefill = firstToken − scheduled,
 * decode = lastToken − firstToken, inference = lastToken − scheduled, TPOT = decode / (generated − 1).
 */
export class RequestTracker {
    readonly record: RequestRecord;
    /** Bumped by the manager whenever the record changes (for deltas). */
    version = 0;
    private tokenCount = 0;

    constructor(readonly serial: number, arrival: ArrivalEvent) {
        this.record = {
            id: arrival.id, phase: "input", priority: arrival.priority, maxTokens: arrival.maxTokens, arrival: arrival.t,
            preemptions: [], promptTokens: 0, generatedTokens: 0, metrics: {}
        };
    }

    inputProcessed(t: number, promptTokens: number): void {
        this.record.inputProcessed = t;
        this.record.promptTokens = promptTokens;
    }

    queued(t: number): void {
        this.record.queued ??= t;
        this.record.phase = "waiting";
    }

    /** vLLM keeps the first SCHEDULED only (a resume after preemption is not a new schedule). */
    scheduled(t: number): void {
        this.record.scheduled ??= t;
        this.record.phase = "running";
    }

    preempted(t: number): void {
        if (this.record.preemptions.length < maxPreemptionTimes)
            this.record.preemptions.push(t);
        this.record.phase = "preempted";
    }

    tokens(times: readonly number[], receivedAt: number): TokensOutcome {
        const record = this.record;
        const outcome: TokensOutcome = {count: times.length, promptTokens: 0, itlS: []};
        if (times.length === 0)
            return outcome;
        let previous = record.lastToken;
        for (const time of times) {
            if (previous !== undefined)
                outcome.itlS.push(seconds(time, previous));
            previous = time;
        }
        record.firstToken ??= times[0];
        record.lastToken = times[times.length - 1];
        if (record.firstDelivered === undefined) {
            record.firstDelivered = receivedAt;
            outcome.ttftS = seconds(receivedAt, record.arrival);
            record.metrics.ttftS = outcome.ttftS;
            outcome.promptTokens = record.promptTokens;
        }
        this.tokenCount += times.length;
        record.generatedTokens = this.tokenCount;
        record.phase = "running";
        return outcome;
    }

    finish(end: FinishInput): FinishedRequestStats {
        const record = this.record;
        record.phase = "finished";
        record.finished = end.t;
        record.lastDelivered = end.receivedAt;
        record.reason = end.reason;
        if (end.error !== undefined)
            record.error = end.error.length > maxErrorLength ? `${end.error.slice(0, maxErrorLength)}…` : end.error;
        record.promptTokens = end.promptTokens || record.promptTokens;
        record.generatedTokens = end.generatedTokens;

        const metrics = record.metrics;
        metrics.e2eS = seconds(end.receivedAt, record.arrival);
        const {queued, scheduled, firstToken, lastToken} = record;
        if (scheduled !== undefined && queued !== undefined)
            metrics.queueS = seconds(scheduled, queued);
        if (firstToken !== undefined && scheduled !== undefined)
            metrics.prefillS = seconds(firstToken, scheduled);
        if (lastToken !== undefined && firstToken !== undefined)
            metrics.decodeS = seconds(lastToken, firstToken);
        if (lastToken !== undefined && scheduled !== undefined)
            metrics.inferenceS = seconds(lastToken, scheduled);
        if (metrics.decodeS !== undefined && this.tokenCount > 1)
            metrics.tpotS = metrics.decodeS / (this.tokenCount - 1);

        return {
            id: record.id, reason: end.reason, e2eS: metrics.e2eS,
            ...(metrics.queueS !== undefined ? {queueS: metrics.queueS} : {}),
            ...(metrics.prefillS !== undefined ? {prefillS: metrics.prefillS} : {}),
            ...(metrics.decodeS !== undefined ? {decodeS: metrics.decodeS} : {}),
            ...(metrics.inferenceS !== undefined ? {inferenceS: metrics.inferenceS} : {}),
            ...(metrics.tpotS !== undefined ? {tpotS: metrics.tpotS} : {}),
            promptTokens: record.promptTokens, generationTokens: record.generatedTokens, maxTokens: record.maxTokens
        };
    }

    /** A copy safe to hand to views (later changes do not leak into it). */
    copy(): RequestRecord {
        return {...this.record, preemptions: [...this.record.preemptions], metrics: {...this.record.metrics}};
    }
}
