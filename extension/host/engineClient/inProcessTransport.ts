import {Engine} from "../../../engine/engine.js";
import type {EngineOptions} from "../../../protocol/engineOptions.js";
import type {EngineToHost, HostToEngine} from "../../../protocol/engineMessages.js";
import type {EngineExit, EngineTransport} from "./engineTransport.js";
import {TurnBatcher} from "./turnBatcher.js";

/**
 * Runs the engine inside the host process: same Engine, same messages, same stats worker thread and
 * channel, no serialization. Model files are validated in JS before llama.cpp sees them (see
 * modelLoader), and EngineClient loads each file once in a child process first (modelLoadCheck),
 * since a native abort here would take the host down.
 */
export class InProcessTransport implements EngineTransport {
    readonly mode = "inProcess";
    readonly pid = process.pid;
    private engine: Engine | undefined;
    private stopped = false;
    private readonly early: HostToEngine[] = [];
    private messageHandler: ((message: unknown, validated: boolean) => void) | undefined;
    private readonly exitHandlers: Array<(exit: EngineExit) => void> = [];
    private readonly outgoing = new TurnBatcher<HostToEngine>((messages) => this.handle(messages));

    constructor(options: EngineOptions) {
        void Engine.start(options, (message) => this.deliver(message)).then((engine) => {
            if (engine === undefined)
                return this.exit({code: 1, signal: null, description: "model failed to load"});
            if (this.stopped)
                return void engine.dispose();
            this.engine = engine;
            for (const message of this.early.splice(0))
                engine.handle(message);
        });
    }

    onMessage(handler: (message: unknown, validated: boolean) => void): void {
        this.messageHandler = handler;
    }

    onExit(handler: (exit: EngineExit) => void): void {
        this.exitHandlers.push(handler);
    }

    /**
     * Asynchronous like IPC, and batched like it (one event-loop turn's messages handled in one go), so
     * callers see the same ordering and requests sent together start together in both modes.
     */
    send(message: HostToEngine): void {
        if (!this.stopped)
            this.outgoing.push(message);
    }

    private handle(messages: HostToEngine[]): void {
        for (const message of messages) {
            if (this.stopped)
                return;
            if (this.engine === undefined)
                this.early.push(message);
            else
                this.engine.handle(message);
        }
    }

    async shutdown(): Promise<void> {
        if (this.stopped)
            return;
        this.stopped = true;
        await this.engine?.dispose();
        this.exit({code: 0, signal: null, description: "stopped"});
    }

    recentStderr(): string {
        return "";
    }

    private deliver(message: EngineToHost): void {
        if (!this.stopped || message.type === "outputs")
            this.messageHandler?.(message, true);
    }

    private exit(exit: EngineExit): void {
        this.stopped = true;
        for (const handler of this.exitHandlers)
            handler(exit);
    }
}
