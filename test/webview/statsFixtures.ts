/**
 * A StatsManager on a fake clock fed a synthetic but complete workload (engine ready, steps, requests
 * with every lifecycle event, one preemption, one failure): real snapshots and deltas for the
 * protocol, store and dashboard tests, with no engine.
 */
import type {EngineInfo} from "../../protocol/engineMessages.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import type {StatsDelta} from "../../protocol/statsView.js";
import {StepFeeder} from "../helpers/stepFeeder.js";

export const T0 = 1_700_000_000_000;

export function fakeEngineInfo(): EngineInfo {
    return {
        pid: 4242, backend: "cpu", gpuDevices: [], gpuFallbacks: [], vramTotalBytes: 0, vramUsedBytes: 0,
        model: {path: "/models/tiny.gguf", name: "tiny-test", architecture: "llama", parameterCount: 1e6, quantization: "F16", sizeBytes: 2e6, trainContextLength: 4096},
        contextSize: 1024, parallel: 4, threads: 1, prefixCache: true, tilePadding: true, promptCacheMiB: 0, prefillChunkTokens: 128, loraAdapters: [], statsIntervalMs: 200, loadMs: 10
    };
}

/** `client`: the request's client label (default the feeder's "test"); `cachedTokens`: of its 8 prompt tokens, found in the prefix cache (default 0). */
export type RunOptions = {fail?: boolean, preempt?: boolean, client?: string, cachedTokens?: number};

export type FakeStats = {manager: StatsManager, clock: {now: number}, deltas: StatsDelta[], runRequest(id: string, options?: RunOptions): void, advance(ms: number): void};

/** A manager with a fake clock and no timer; `advance` moves the clock and ticks. */
export function fakeStats(): FakeStats {
    const clock = {now: T0};
    const manager = new StatsManager({now: () => clock.now, tickIntervalMs: 0});
    manager.onEngineReady(fakeEngineInfo());
    manager.onEngineState("ready");
    const feed = new StepFeeder(manager);
    const deltas: StatsDelta[] = [];
    const advance = (ms: number): void => {
        clock.now += ms;
        manager.tick();
    };
    const runRequest = (id: string, options: RunOptions = {}): void => {
        const t = clock.now;
        feed.send({kind: "arrival", id, t, priority: 0, maxTokens: 16, ...(options.client !== undefined ? {client: options.client} : {})});
        feed.send({kind: "inputProcessed", id, t: t + 1, promptTokens: 8, receivedAt: t + 1});
        feed.send({kind: "queued", id, t: t + 2, receivedAt: t + 2});
        feed.send({kind: "scheduled", id, t: t + 5, cachedTokens: options.cachedTokens ?? 0, sequence: 0, receivedAt: t + 5});
        feed.step({t: t + 6, running: 1, waiting: 0, stepTokens: 8, kvUsedTokens: 24, kvCapacityTokens: 1024});
        if (options.preempt === true)
            feed.send({kind: "preempted", id, t: t + 7, receivedAt: t + 7});
        const times = Array.from({length: 16}, (_, i) => t + 10 + i * 3);
        feed.send({kind: "tokens", id, text: "x".repeat(16), times: times.slice(0, 8), receivedAt: t + 32});
        feed.send({kind: "tokens", id, text: "y".repeat(8), times: times.slice(8), receivedAt: t + 60});
        feed.step({t: t + 60, running: 0, waiting: 0, stepTokens: 16, kvUsedTokens: 0, kvCapacityTokens: 1024});
        feed.send({kind: "finished", id, t: t + 61, reason: options.fail === true ? "error" : "length", promptTokens: 8,
            generatedTokens: 16, receivedAt: t + 62, ...(options.fail === true ? {error: "boom, \"quoted\"\nline"} : {})});
        clock.now = t + 100;
    };
    return {manager, clock, deltas, runRequest, advance};
}
