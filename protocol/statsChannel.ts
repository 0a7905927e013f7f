/**
 * Messages on the stats channel: a WebSocket from the engine's stats worker thread to the host.
 * The worker sends a snapshot every interval, read from counters the engine's main thread keeps in
 * shared memory, so snapshots keep arriving while the main thread is busy or stuck.
 */
import {ProtocolError, expectInteger, expectNumber, expectObject} from "./validation.js";

/** Header carrying the per-spawn secret; the host refuses a stats client without it. */
export const statsSecretHeader = "x-inference-monitor-secret";
/** Environment variables that hand the stats channel to a spawned engine (never argv). */
export const statsUrlEnv = "INFERENCE_MONITOR_STATS_URL";
export const statsSecretEnv = "INFERENCE_MONITOR_STATS_SECRET";
/** Largest stats frame either side accepts. */
export const statsMaxPayloadBytes = 16 * 1024;

export type StatsSnapshot = {
    type: "snapshot",
    /** Increments per snapshot; a gap means a lost snapshot. */
    seq: number,
    pid: number,
    /** Worker's clock, epoch ms. */
    t: number,
    running: number,
    waiting: number,
    promptTokensTotal: number,
    generationTokensTotal: number,
    stepsTotal: number,
    /** ms since the engine's main thread last finished a step; 0 while nothing is running. */
    msSinceLastStep: number,
    kvUsedTokens: number,
    kvCapacityTokens: number,
    vramUsedBytes: number,
    vramTotalBytes: number,
    rssBytes: number
};

export type StatsHello = {type: "hello", pid: number, intervalMs: number};

export type StatsMessage = StatsSnapshot | StatsHello;

const snapshotNumberKeys = [
    "running", "waiting", "promptTokensTotal", "generationTokensTotal", "stepsTotal", "msSinceLastStep",
    "kvUsedTokens", "kvCapacityTokens", "vramUsedBytes", "vramTotalBytes", "rssBytes"
] as const;

/** Validates a frame arriving at the host on the stats channel; throws ProtocolError. */
export function parseStatsMessage(raw: string): StatsMessage {
    let value: unknown;
    try {
        value = JSON.parse(raw);
    } catch {
        throw new ProtocolError("stats frame is not valid JSON");
    }
    const obj = expectObject(value, "stats");
    if (obj.type === "hello")
        return {type: "hello", pid: expectInteger(obj, "pid", "hello"), intervalMs: expectNumber(obj, "intervalMs", "hello")};
    if (obj.type !== "snapshot")
        throw new ProtocolError(`unknown stats message type ${JSON.stringify(String(obj.type)).slice(0, 80)}`);
    const snapshot: StatsSnapshot = {
        type: "snapshot", seq: expectInteger(obj, "seq", "snapshot"), pid: expectInteger(obj, "pid", "snapshot"),
        t: expectNumber(obj, "t", "snapshot"), running: 0, waiting: 0, promptTokensTotal: 0, generationTokensTotal: 0,
        stepsTotal: 0, msSinceLastStep: 0, kvUsedTokens: 0, kvCapacityTokens: 0, vramUsedBytes: 0, vramTotalBytes: 0, rssBytes: 0
    };
    for (const key of snapshotNumberKeys)
        snapshot[key] = expectNumber(obj, key, "snapshot");
    return snapshot;
}
