import {ProtocolError, expectNumber, expectObject, expectString} from "../../protocol/validation.js";
import type {SharedCountersHandle} from "./sharedCounters.js";

/** What the engine hands its stats worker thread (through workerData, never argv). */
export type StatsWorkerData = {url: string, secret: string, intervalMs: number, counters: SharedCountersHandle};

export function parseStatsWorkerData(value: unknown): StatsWorkerData {
    const obj = expectObject(value, "workerData");
    const counters = expectObject(obj.counters, "workerData.counters");
    if (!(counters.buffer instanceof SharedArrayBuffer))
        throw new ProtocolError("workerData.counters.buffer: expected a SharedArrayBuffer");
    const intervalMs = expectNumber(obj, "intervalMs", "workerData");
    if (intervalMs <= 0)
        throw new ProtocolError("workerData.intervalMs: must be > 0");
    return {
        url: expectString(obj, "url", "workerData"),
        secret: expectString(obj, "secret", "workerData"),
        intervalMs,
        counters: {buffer: counters.buffer, baseEpochMs: expectNumber(counters, "baseEpochMs", "workerData.counters")}
    };
}
