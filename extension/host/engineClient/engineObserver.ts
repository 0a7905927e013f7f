import type {EngineInfo, EngineLogLevel} from "../../../protocol/engineMessages.js";
import type {EngineStep} from "./engineStep.js";
import type {EngineExit} from "./engineTransport.js";
import type {ReceivedSnapshot} from "./statsChannelServer.js";

export type EngineClientState = "stopped" | "loading" | "ready" | "crashed";

export type RejectedMessage = {source: "engine" | "host" | "stats", reason: string};

export type {EngineLogLevel};

/**
 * Everything an EngineClient tells the code that follows it (StatsManager, the VS Code glue, tests),
 * called synchronously and in order. Implement the methods you need; `EngineClient.observe` returns the
 * function that stops the calls.
 */
export interface EngineObserver {
    onEngineState?(state: EngineClientState): void,
    /** Model load progress, 0..1. */
    onLoading?(fraction: number): void,
    onEngineReady?(info: EngineInfo): void,
    /** One engine step, or a host-side lifecycle change (arrival, a request ended on the host). */
    onOutputs?(step: EngineStep): void,
    /** A stats-channel snapshot (the worker's clock is this machine's clock). */
    onStatsSnapshot?(snapshot: ReceivedSnapshot): void,
    onRejected?(message: RejectedMessage): void,
    onEngineExit?(exit: EngineExit): void,
    onLog?(level: EngineLogLevel, message: string): void
}
