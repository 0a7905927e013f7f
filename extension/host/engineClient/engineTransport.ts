import type {HostToEngine} from "../../../protocol/engineMessages.js";

export type EngineExit = {code: number | null, signal: string | null, description: string};

/** How an EngineClient reaches its engine: a child process or the same process. */
export interface EngineTransport {
    readonly mode: "process" | "inProcess",
    readonly pid: number,
    /** `validated` is false when the message crossed a process boundary and must be parsed. */
    onMessage(handler: (message: unknown, validated: boolean) => void): void,
    onExit(handler: (exit: EngineExit) => void): void,
    send(message: HostToEngine): void,
    /** Asks the engine to shut down; kills it after `graceMs`. Resolves once it is gone. */
    shutdown(graceMs: number): Promise<void>,
    /** Last lines the engine wrote to stderr, for error messages. */
    recentStderr(): string
}
