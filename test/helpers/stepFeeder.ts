/**
 * Feeds a StatsManager (or any EngineObserver) the way EngineClient does, from synthetic host-clock
 * lifecycle events: each event goes through the real OutputProcessor, which builds the lifecycles and
 * the step's iteration stats. Tests then check StatsManager's numbers exactly.
 */
import type {RequestEvent, StepStats} from "../../protocol/engineMessages.js";
import type {EngineObserver} from "../../extension/host/engineClient/engineObserver.js";
import type {EngineStep} from "../../extension/host/engineClient/engineStep.js";
import {OutputProcessor} from "../../extension/host/engineClient/outputProcessor.js";

/** A request entering the host. */
export type ArrivalEvent = {kind: "arrival", id: string, t: number, priority: number, maxTokens: number, client?: string};
/** An engine event already on the host clock, with the time the host received it. */
export type HostEvent = ArrivalEvent | (RequestEvent & {receivedAt: number});

export class StepFeeder {
    readonly processor = new OutputProcessor();
    /** Every step handed to the observer, in order. */
    readonly steps: EngineStep[] = [];
    /** Ids of events for requests not in flight (EngineClient rejects those as "output for unknown request"). */
    readonly unknownIds: string[] = [];

    constructor(private readonly observer: EngineObserver) {}

    /** One event, as its own step (what an outputs message with one event does). */
    send(event: HostEvent): void {
        if (event.kind === "arrival")
            this.deliver(this.processor.arrive(event.id, event.client ?? "test", event.t, event.priority, event.maxTokens));
        else
            this.outputs([event], undefined, event.receivedAt);
    }

    /** Several engine events and the step stats in one outputs message, received at `receivedAt`. */
    outputs(events: RequestEvent[], stats: StepStats | undefined, receivedAt: number): void {
        const {step, unknownIds} = this.processor.process(events, stats, 0, receivedAt);
        this.unknownIds.push(...unknownIds);
        this.deliver(step);
    }

    /** An outputs message with step stats and no events. */
    step(stats: StepStats): void {
        this.outputs([], stats, stats.t);
    }

    /** Ends requests on the host side, as EngineClient does when the engine exits or a request never reached it. */
    endOnHost(ids: string[], error: string, t: number): void {
        const step = this.processor.finishLocally(ids, "error", error, t);
        if (step !== undefined)
            this.deliver(step);
    }

    private deliver(step: EngineStep): void {
        this.steps.push(step);
        this.observer.onOutputs?.(step);
    }
}
