/**
 * `npm run bench:ingest -- [--seconds S] [--running N] [--json FILE]`
 *
 * How many token events per second the host's stats path takes on one core: engine outputs messages
 * (N running requests, one token each per step, requests finishing and arriving as in a closed-loop
 * benchmark) go through the real OutputProcessor into the real StatsPipeline — StatsManager with the
 * log-line and a mounted Prometheus logger — plus a panel-style subscriber that receives deltas at 4 Hz.
 * The manager's own 250 ms tick runs between batches of steps. Nothing waits on the engine, so this is
 * the host's ceiling; issue F asks for ≥ 200k token events/s.
 * Prints token events/s, steps/s and the median cost per step. A benchmark, not a test.
 */
import fs from "node:fs";
import {integerValue, positiveNumberValue} from "../cli/optionValues.js";
import {nowMs} from "../common/clock.js";
import {OutputProcessor} from "../extension/host/engineClient/outputProcessor.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import type {EngineInfo, RequestEvent, StepStats} from "../protocol/engineMessages.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";

const flags = readScriptCommandLine({
    name: "bench:ingest",
    summary: "token events per second the host's stats path (OutputProcessor → StatsPipeline, a 4 Hz subscriber) takes on one core",
    options: {
        "seconds": {type: "string", placeholder: "S", description: "how long to feed it (default 5)"},
        "running": {type: "string", placeholder: "N", description: "running requests, one token each per step (default 8)"},
        "output-len": {type: "string", placeholder: "N", description: "tokens per request before it finishes and another arrives (default 64)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the results to FILE"}
    },
    details: "How it measures: this script's header (no engine runs: synthetic engine outputs, the host's ceiling)."
}, (values) => ({
    seconds: positiveNumberValue("seconds", values.seconds, 5),
    running: integerValue("running", values.running, 8, 1),
    outputLen: integerValue("output-len", values["output-len"], 64, 1),
    json: values.json
}));

const info: EngineInfo = {
    pid: process.pid, backend: "cpu", gpuDevices: [], gpuFallbacks: [], vramTotalBytes: 0, vramUsedBytes: 0,
    model: {path: "/bench/model.gguf", name: "bench", architecture: "llama", parameterCount: 2e7, quantization: "F16", sizeBytes: 4e7, trainContextLength: 4096},
    contextSize: 4096, parallel: 8, threads: 1, prefixCache: true, tilePadding: false, promptCacheMiB: 0, prefillChunkTokens: 128,
    loraAdapters: [], statsIntervalMs: 1000, loadMs: 1
};

async function main(): Promise<void> {
    const {seconds, running, outputLen} = flags;
    const pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 1});
    const render = await pipeline.mountMetrics();
    const manager = pipeline.manager;
    manager.onEngineReady(info);
    manager.onEngineState("ready");
    let deltas = 0;
    let deltaBytes = 0;
    // As the panel session does: every delta is serialized to go over the socket.
    const unsubscribe = manager.subscribe((delta) => {
        deltas++;
        deltaBytes += JSON.stringify(delta).length;
    }, {maxHz: 4});
    const processor = new OutputProcessor();

    type Live = {id: string, generated: number};
    let nextId = 0;
    const live: Live[] = [];
    const admit = (t: number, events: RequestEvent[]): void => {
        const id = `r${nextId++}`;
        manager.onOutputs(processor.arrive(id, "bench", t, 0, outputLen));
        events.push({kind: "inputProcessed", id, t, promptTokens: 48}, {kind: "queued", id, t}, {kind: "scheduled", id, t, cachedTokens: 0});
        live.push({id, generated: 0});
    };

    let tokenEvents = 0;
    let steps = 0;
    const stepCosts: number[] = [];
    const start = nowMs();
    const deadline = start + seconds * 1000;
    while (nowMs() < deadline) {
        // A few hundred steps between event-loop turns, so timers (ticks, deltas) still run.
        for (let batch = 0; batch < 200; batch++) {
            const t = nowMs();
            const events: RequestEvent[] = [];
            while (live.length < running)
                admit(t, events);
            for (let i = 0; i < live.length; i++) {
                const request = live[i]!;
                request.generated++;
                events.push({kind: "tokens", id: request.id, text: " word", times: [t]});
                tokenEvents++;
                if (request.generated >= outputLen) {
                    events.push({kind: "finished", id: request.id, t, reason: "length", promptTokens: 48, generatedTokens: outputLen});
                    live.splice(i--, 1);
                }
            }
            const stats: StepStats = {t, running: live.length, waiting: 0, stepTokens: running,
                kvUsedTokens: running * 80, kvCapacityTokens: 4096};
            const before = nowMs();
            manager.onOutputs(processor.process(events, stats, 0, t).step);
            stepCosts.push(nowMs() - before);
            steps++;
        }
        await new Promise((resolve) => setImmediate(resolve));
    }
    const elapsedS = (nowMs() - start) / 1000;
    const metricsBody = (await render()).body;
    unsubscribe();
    await pipeline.dispose();
    if (manager.counters().generationTokens !== tokenEvents)
        throw new Error(`the manager counted ${manager.counters().generationTokens} generated tokens of ${tokenEvents} sent`);
    stepCosts.sort((a, b) => a - b);
    const result = {
        seconds: elapsedS, running, token_events: tokenEvents, token_events_per_s: tokenEvents / elapsedS, steps_per_s: steps / elapsedS,
        median_step_us: stepCosts[Math.floor(stepCosts.length / 2)]! * 1000,
        p99_step_us: stepCosts[Math.floor(stepCosts.length * 0.99)]! * 1000,
        generation_tokens_counted: manager.counters().generationTokens, deltas_sent: deltas, delta_bytes: deltaBytes,
        metrics_bytes: metricsBody.length
    };
    console.log("StatsManager ingest (OutputProcessor → StatsManager + log-line and Prometheus loggers, a 4 Hz delta subscriber), " +
        `${running} running, one core:`);
    const perS = (n: number): string => Math.round(n).toLocaleString("en-US");
    console.log(`  ${perS(result.token_events_per_s)} token events/s · ${perS(result.steps_per_s)} steps/s · ` +
        `step p50 ${result.median_step_us.toFixed(1)} µs, p99 ${result.p99_step_us.toFixed(1)} µs · ${tokenEvents.toLocaleString("en-US")} token events in ${elapsedS.toFixed(1)} s`);
    if (flags.json !== undefined)
        fs.writeFileSync(flags.json, JSON.stringify(result, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
