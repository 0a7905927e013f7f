/**
 * Stats worker thread: owns the WebSocket to the host and, every interval, sends a snapshot of the
 * shared counters. It never waits on the engine's main thread, so a blocked engine shows up as a
 * growing `msSinceLastStep` instead of silence.
 */
import {parentPort, workerData} from "node:worker_threads";
import WebSocket from "ws";
import {statsMaxPayloadBytes, statsSecretHeader, type StatsHello, type StatsSnapshot} from "../../protocol/statsChannel.js";
import {CounterSlot, SharedCounters} from "./sharedCounters.js";
import {parseStatsWorkerData} from "./statsWorkerData.js";

const config = parseStatsWorkerData(workerData);
const counters = new SharedCounters(config.counters);
const mib = 1024 * 1024;
/** Snapshots taken while not connected, sent on (re)connect: nothing is lost to a slow handshake. */
const maxBacklog = 120;
const backlog: string[] = [];
let socket: WebSocket | undefined;
let seq = 0;

function connect(): void {
    const ws = new WebSocket(config.url, {headers: {[statsSecretHeader]: config.secret}, maxPayload: statsMaxPayloadBytes});
    socket = ws;
    ws.on("open", () => {
        const hello: StatsHello = {type: "hello", pid: process.pid, intervalMs: config.intervalMs};
        ws.send(JSON.stringify(hello));
        for (const frame of backlog.splice(0))
            ws.send(frame);
        sendSnapshot();
    });
    ws.on("error", () => {
        // "close" follows; reconnection happens on the next tick of the interval.
    });
    ws.on("close", () => {
        if (socket === ws)
            socket = undefined;
    });
}

function sendSnapshot(): void {
    const now = Date.now();
    const snapshot: StatsSnapshot = {
        type: "snapshot",
        seq: seq++,
        pid: process.pid,
        t: now,
        running: counters.get(CounterSlot.running),
        waiting: counters.get(CounterSlot.waiting),
        promptTokensTotal: counters.get(CounterSlot.promptTokensTotal),
        generationTokensTotal: counters.get(CounterSlot.generationTokensTotal),
        stepsTotal: counters.get(CounterSlot.stepsTotal),
        msSinceLastStep: counters.msSinceLastStep(now),
        kvUsedTokens: counters.get(CounterSlot.kvUsedTokens),
        kvCapacityTokens: counters.get(CounterSlot.kvCapacityTokens),
        vramUsedBytes: counters.get(CounterSlot.vramUsedMiB) * mib,
        vramTotalBytes: counters.get(CounterSlot.vramTotalMiB) * mib,
        rssBytes: process.memoryUsage.rss()
    };
    const frame = JSON.stringify(snapshot);
    if (socket !== undefined && socket.readyState === WebSocket.OPEN)
        socket.send(frame);
    else {
        backlog.push(frame);
        if (backlog.length > maxBacklog)
            backlog.shift();
    }
}

connect();
setInterval(() => {
    if (socket === undefined)
        connect();
    sendSnapshot();
}, config.intervalMs);

parentPort?.on("message", (message: unknown) => {
    if (message === "close") {
        socket?.close(1000, "engine stopping");
        process.exit(0);
    }
});
