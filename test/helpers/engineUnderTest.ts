/**
 * An Engine run in this process without EngineClient, its outputs collected per request: for tests of
 * the engine's own scheduling (prefix caching, chunked prefill) that look at its raw events and steps.
 */
import assert from "node:assert/strict";
import {Engine} from "../../engine/engine.js";
import type {EngineInfo, EngineToHost, GenerateRequest, RequestEvent} from "../../protocol/engineMessages.js";
import type {EngineOptions} from "../../protocol/engineOptions.js";
import {tinyModelPath} from "./testModels.js";

export type Finished = Extract<RequestEvent, {kind: "finished"}>;
/** `restoredTokens`: the `scheduled` event's (undefined: the engine has no prompt cache). */
export type Outcome = {text: string, cachedTokens: number, restoredTokens: number | undefined, finished: Finished, stepTokens: number};

export class EngineUnderTest {
    private readonly texts = new Map<string, string>();
    private readonly scheduled = new Map<string, Extract<RequestEvent, {kind: "scheduled"}>>();
    private readonly waiters = new Map<string, (event: Finished) => void>();
    private stepTokens = 0;
    /** Every request event, in the order the engine sent them. */
    readonly events: RequestEvent[] = [];
    /** The events of each outputs message (one engine step each), in order. */
    readonly steps: RequestEvent[][] = [];
    /** When the engine sent each outputs message (its `step.t`, engine clock), in the order of `steps`. */
    readonly stepTimes: number[] = [];
    /** The engine's log messages (warnings), in order. */
    readonly logs: string[] = [];
    /** The info of the engine's `ready` message. */
    info: EngineInfo | undefined;
    private nextId = 0;

    private constructor(readonly engine: Engine) {}

    /** The tiny model, one thread, 1024 tokens per sequence, no stats worker, plus `options`. */
    static async start(options: EngineOptions): Promise<EngineUnderTest> {
        let self: EngineUnderTest | undefined;
        const pending: EngineToHost[] = [];
        const engine = await Engine.start(
            {modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, statsIntervalMs: 0, ...options},
            (message) => self === undefined ? pending.push(message) : self.receive(message));
        assert.ok(engine !== undefined, "the engine did not start");
        self = new EngineUnderTest(engine);
        for (const message of pending)
            self.receive(message);
        return self;
    }

    private receive(message: EngineToHost): void {
        if (message.type === "log")
            this.logs.push(message.message);
        if (message.type === "ready")
            this.info = message.info;
        if (message.type !== "outputs")
            return;
        this.stepTokens += message.step.stepTokens;
        this.steps.push(message.events);
        this.stepTimes.push(message.step.t);
        for (const event of message.events) {
            this.events.push(event);
            if (event.kind === "tokens")
                this.texts.set(event.id, (this.texts.get(event.id) ?? "") + event.text);
            else if (event.kind === "scheduled")
                this.scheduled.set(event.id, event);
            else if (event.kind === "finished")
                this.waiters.get(event.id)?.(event);
        }
    }

    async generate(request: Omit<GenerateRequest, "id">): Promise<Outcome> {
        return await this.send(request).done;
    }

    /** Sends a request; `done` resolves when it finishes. `stepTokens` counts every request's tokens evaluated meanwhile. */
    send(request: Omit<GenerateRequest, "id">): {id: string, done: Promise<Outcome>} {
        const id = `r${this.nextId++}`;
        const stepsBefore = this.stepTokens;
        const finished = new Promise<Finished>((resolve) => this.waiters.set(id, resolve));
        this.engine.handle({type: "generate", request: {id, ...request}});
        // The step that carried `finished` has been counted by the time its events are read.
        const done = finished.then((event) => ({
            text: this.texts.get(id) ?? "", cachedTokens: this.scheduled.get(id)?.cachedTokens ?? -1,
            restoredTokens: this.scheduled.get(id)?.restoredTokens, finished: event, stepTokens: this.stepTokens - stepsBefore
        }));
        return {id, done};
    }
}
