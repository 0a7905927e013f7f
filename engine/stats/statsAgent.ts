import {Worker} from "node:worker_threads";
import {bundledEntryPath} from "../bundlePaths.js";
import type {StatsChannelTarget} from "../../protocol/engineOptions.js";
import type {StepStats} from "../../protocol/engineMessages.js";
import {CounterSlot, SharedCounters} from "./sharedCounters.js";
import type {StatsWorkerData} from "./statsWorkerData.js";

const mib = 1024 * 1024;

/**
 * The engine main thread's side of the stats channel: keeps the shared counters and owns the worker
 * thread that reports them. Everything it does on the engine's hot path is an Atomics store.
 */
export class StatsAgent {
    readonly counters = new SharedCounters();
    private readonly worker: Worker;

    constructor(target: StatsChannelTarget, intervalMs: number) {
        const workerData: StatsWorkerData = {url: target.url, secret: target.secret, intervalMs, counters: this.counters.handle};
        this.worker = new Worker(bundledEntryPath("statsWorker.js"), {workerData, env: {}, execArgv: [], stdout: false, stderr: false});
        this.worker.unref();
        this.worker.on("error", () => {
            // A failed stats worker must not take the engine down; the host sees the snapshots stop.
        });
    }

    onStep(step: StepStats): void {
        const counters = this.counters;
        counters.markStep(Date.now());
        counters.set(CounterSlot.running, step.running);
        counters.set(CounterSlot.waiting, step.waiting);
        counters.set(CounterSlot.kvUsedTokens, step.kvUsedTokens);
    }

    setVram(usedBytes: number, totalBytes: number): void {
        this.counters.set(CounterSlot.vramUsedMiB, Math.round(usedBytes / mib));
        this.counters.set(CounterSlot.vramTotalMiB, Math.round(totalBytes / mib));
    }

    async dispose(): Promise<void> {
        this.worker.postMessage("close");
        await this.worker.terminate();
    }
}
