import type {EngineInfo, StepStats} from "../../../protocol/engineMessages.js";
import type {EngineClientState} from "../engineClient/engineObserver.js";
import type {ReceivedSnapshot} from "../engineClient/statsChannelServer.js";
import type {EngineGaugeValues} from "./loggers/statLogger.js";
import type {EngineStateName} from "../../../protocol/statsView.js";

/**
 * The engine's gauges and state, from two sources: step stats (on the outputs) and stats-channel
 * snapshots (which keep coming while the engine's main thread is blocked). Gauges follow whichever
 * source is newest by its own timestamp. "Stalled" = requests running and no step for longer than
 * the threshold, measured two ways, whichever says more: the snapshots' `msSinceLastStep` (aged by
 * the time since that snapshot arrived) and the host's own time since it last saw a step.
 */
export class EngineStateTracker {
    clientState: EngineClientState = "stopped";
    info: EngineInfo | undefined;
    running = 0;
    waiting = 0;
    kvUsedTokens = 0;
    kvCapacityTokens = 0;
    vramUsedBytes = 0;
    vramTotalBytes = 0;
    /** Timestamp (source clock) of the newest step/snapshot applied to the gauges. */
    private gaugeT = Number.NEGATIVE_INFINITY;
    /** Host time the last step that evaluated tokens was seen, and its engine time. */
    private lastStepSeenAt: number | undefined;
    private lastStepT = Number.NEGATIVE_INFINITY;
    /** Host time `running` last went from 0 to more. */
    private runningSince: number | undefined;
    private snapshot: {t: number, msSinceLastStep: number, seenAt: number} | undefined;

    constructor(public stallThresholdMs: number) {}

    onStep(step: StepStats, now: number): void {
        if (step.stepTokens > 0) {
            this.lastStepSeenAt = now;
            this.lastStepT = Math.max(this.lastStepT, step.t);
        }
        if (step.t >= this.gaugeT) {
            this.gaugeT = step.t;
            this.setQueues(step.running, step.waiting, now);
            this.kvUsedTokens = step.kvUsedTokens;
            this.kvCapacityTokens = step.kvCapacityTokens;
        }
    }

    /** Returns false when the snapshot is ignored: no engine running, another engine's pid, or older than one already seen. */
    onSnapshot(snapshot: ReceivedSnapshot, now: number): boolean {
        if (this.clientState === "stopped" || this.clientState === "crashed")
            return false;
        if (this.info !== undefined && snapshot.pid !== this.info.pid)
            return false;
        if (this.snapshot !== undefined && snapshot.t < this.snapshot.t)
            return false;
        this.snapshot = {t: snapshot.t, msSinceLastStep: snapshot.msSinceLastStep, seenAt: now};
        if (snapshot.vramTotalBytes > 0) {
            this.vramUsedBytes = snapshot.vramUsedBytes;
            this.vramTotalBytes = snapshot.vramTotalBytes;
        }
        if (snapshot.t >= this.gaugeT) {
            this.gaugeT = snapshot.t;
            this.setQueues(snapshot.running, snapshot.waiting, now);
            this.kvUsedTokens = snapshot.kvUsedTokens;
            this.kvCapacityTokens = snapshot.kvCapacityTokens;
        }
        return true;
    }

    onReady(info: EngineInfo): void {
        this.info = info;
        this.clientState = "ready";
        this.vramUsedBytes = info.vramUsedBytes;
        this.vramTotalBytes = info.vramTotalBytes;
        this.clearEngineGauges();
    }

    onClientState(state: EngineClientState): void {
        if (state === this.clientState)
            return;
        this.clientState = state;
        if (state !== "ready")
            this.clearEngineGauges();
    }

    onExit(abnormal: boolean): void {
        if (this.clientState !== "crashed")
            this.clientState = abnormal ? "crashed" : "stopped";
        this.clearEngineGauges();
    }

    get kvCacheUsage(): number {
        return this.kvCapacityTokens > 0 ? this.kvUsedTokens / this.kvCapacityTokens : 0;
    }

    /** ms since the engine last stepped while requests run; 0 when nothing runs. */
    msSinceLastStep(now: number): number {
        if (this.running === 0)
            return 0;
        const since = Math.max(this.lastStepSeenAt ?? Number.NEGATIVE_INFINITY, this.runningSince ?? Number.NEGATIVE_INFINITY);
        const hostMs = Number.isFinite(since) ? Math.max(0, now - since) : 0;
        const snapshot = this.snapshot;
        const snapshotMs = snapshot !== undefined && snapshot.msSinceLastStep > 0 && snapshot.t > this.lastStepT
            ? snapshot.msSinceLastStep + Math.max(0, now - snapshot.seenAt)
            : 0;
        return Math.max(hostMs, snapshotMs);
    }

    state(now: number, inFlight: number): EngineStateName {
        switch (this.clientState) {
            case "loading": return "loading";
            case "stopped": return "stopped";
            case "crashed": return "crashed";
            case "ready":
                if (this.running > 0 && this.msSinceLastStep(now) > this.stallThresholdMs)
                    return "stalled";
                return this.running > 0 || this.waiting > 0 || inFlight > 0 ? "busy" : "idle";
        }
    }

    gauges(now: number, inFlight: number): EngineGaugeValues {
        return {
            state: this.state(now, inFlight), running: this.running, waiting: this.waiting, kvCacheUsage: this.kvCacheUsage,
            vramUsedBytes: this.vramUsedBytes, vramTotalBytes: this.vramTotalBytes, msSinceLastStep: this.msSinceLastStep(now)
        };
    }

    private setQueues(running: number, waiting: number, now: number): void {
        if (this.running === 0 && running > 0)
            this.runningSince = now;
        this.running = running;
        this.waiting = waiting;
    }

    /** A new, stopped or dead engine: nothing runs, no step history, no snapshot. */
    private clearEngineGauges(): void {
        this.running = 0;
        this.waiting = 0;
        this.kvUsedTokens = 0;
        this.gaugeT = Number.NEGATIVE_INFINITY;
        this.lastStepSeenAt = undefined;
        this.lastStepT = Number.NEGATIVE_INFINITY;
        this.runningSince = undefined;
        this.snapshot = undefined;
    }
}
