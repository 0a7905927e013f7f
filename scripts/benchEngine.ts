/**
 * `npm run bench:engine -- [--json FILE] [--models small,medium] [--dtype f16|q8_0|q4_0] [--tokens N] [--repeats R] [--threads T]`
 *
 * Decode tokens/s through Engine + EngineClient (process mode, stats on) versus bare node-llama-cpp
 * `sequence.evaluate` loops on one context, with the same model, threads and context, at 1, 2, 4 and
 * 8 concurrent requests. Both sides are timed where their caller gets the tokens: the bare loop when
 * `evaluate` yields each token, the engine when the host receives the outputs message that carries it
 * (`RequestResult.deliveries`), so the IPC hop and the host's handling count against the engine.
 * Runs interleave engine and bare measurements and report the median of `--repeats`, so machine noise
 * hits both sides alike. The bare loop runs in this process, on the engine's libuv pool size (engineThreadpool.ts).
 * Also measures the engine's decode with 1 and 2 llama.cpp threads at 1 and 4 concurrent requests, to justify the
 * default (best_threads: the faster at 4). A benchmark, not a test: it prints numbers and asserts nothing.
 */
import fs from "node:fs";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {nowMs} from "../common/clock.js";
import {importNodeLlamaCpp, type LlamaContext, type Token} from "../engine/llamaTypes.js";
import {demoModelDtypes, demoModelSizeNames, ensureDemoModel} from "../engine/model/demoModel.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import type {RequestResult} from "../extension/host/engineClient/requestState.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {runOnEngineThreadpool} from "./engineThreadpool.js";
import {choiceItem, listValue, readScriptCommandLine} from "./scriptCommandLine.js";


// Read before runOnEngineThreadpool: --help and usage errors end here, in this process; its child reads the same argv again.
const flags = readScriptCommandLine({
    name: "bench:engine",
    summary: "decode tokens/s through Engine + EngineClient vs bare node-llama-cpp at 1, 2, 4 and 8 concurrent requests",
    options: {
        json: {type: "string", placeholder: "FILE", description: "also write the results to FILE"},
        models: {type: "string", placeholder: "SIZE,…", description: "demo model sizes to run in turn: tiny, small, medium (default small,medium)"},
        dtype: {type: "string", placeholder: "D", description: `the demo models' weights: ${demoModelDtypes.join(" | ")} (default f16)`},
        tokens: {type: "string", placeholder: "N", description: "tokens generated per request (default 48)"},
        repeats: {type: "string", placeholder: "R", description: "repeats per cell, the median reported (default 3)"},
        threads: {type: "string", placeholder: "T", description: "llama.cpp threads, the engine's and the bare loop's alike (default 1)"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\") and this script's header."
}, (values) => ({
    json: values.json,
    models: listValue("models", values.models, ["small", "medium"], `demo model sizes from ${demoModelSizeNames.join(", ")}, separated by commas`,
        choiceItem(demoModelSizeNames)),
    dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16"),
    // Two at least: a request's decode rate is its tokens after the first over the time they took.
    tokens: integerValue("tokens", values.tokens, 48, 2),
    repeats: integerValue("repeats", values.repeats, 3, 1),
    threads: integerValue("threads", values.threads, 1, 1)
}));
const {models, dtype, tokens, repeats, threads} = flags;
const concurrencies = [1, 2, 4, 8];
const contextSize = 4096;
const prompt = "Once upon a time, in a small town by the sea, there lived";

/** Decode rate of a set of streams: tokens after each first token over the span they took. */
function decodeRate(streams: number[][]): number {
    const firsts = streams.map((times) => times[0]!);
    const lasts = streams.map((times) => times[times.length - 1]!);
    const decoded = streams.reduce((sum, times) => sum + times.length - 1, 0);
    return decoded / ((Math.max(...lasts) - Math.min(...firsts)) / 1000);
}


async function bareRun(context: LlamaContext, promptTokens: Token[], n: number): Promise<number> {
    const sequences = Array.from({length: n}, () => context.getSequence());
    try {
        const streams = await Promise.all(sequences.map(async (sequence, i) => {
            const times: number[] = [];
            for await (const _token of sequence.evaluate(promptTokens, {temperature: 0.8, seed: i, yieldEogToken: true})) {
                times.push(nowMs());
                if (times.length >= tokens)
                    break;
            }
            return times;
        }));
        return decodeRate(streams);
    } finally {
        for (const sequence of sequences)
            await sequence.dispose();
    }
}

async function engineRun(client: EngineClient, n: number): Promise<number> {
    const results = await Promise.all(Array.from({length: n}, (_, i) =>
        client.generate({prompt, maxTokens: tokens, temperature: 0.8, seed: i, ignoreEos: true}).done));
    return decodeRate(results.map(deliveredTimes));
}

/** One host-delivery time per token: a delivery that carried k tokens gives each of them its time. */
function deliveredTimes(result: RequestResult): number[] {
    const times = result.deliveries.flatMap((delivery) => Array.from({length: delivery.tokens}, () => delivery.t));
    if (times.length !== result.generatedTokens)
        throw new Error(`request ${result.id}: ${times.length} tokens delivered, ${result.generatedTokens} generated`);
    return times;
}

async function main(): Promise<void> {
    const {getLlama, LlamaLogLevel} = await importNodeLlamaCpp();
    const llama = await getLlama({gpu: "auto", build: "never", logLevel: LlamaLogLevel.error});
    const results: Array<{model: string, n: number, engine_tokens_per_s: number, bare_tokens_per_s: number, ratio: number}> = [];
    const threadResults: Array<{model: string, threads: number, n: number, tokens_per_s: number}> = [];

    for (const size of models) {
        const modelPath = await ensureDemoModel({size, dtype});
        const model = await llama.loadModel({modelPath});
        const context = await model.createContext({sequences: 8, contextSize, threads: {ideal: threads, min: 1}});
        const promptTokens = model.tokenize(prompt, false);
        const client = new EngineClient({modelPath, threads, parallel: 8, contextSize, statsIntervalMs: 1000});
        await client.start();
        await engineRun(client, 1); // warm up both sides
        await bareRun(context, promptTokens, 1);
        for (const n of concurrencies) {
            const engine: number[] = [];
            const bare: number[] = [];
            for (let r = 0; r < repeats; r++) {
                engine.push(await engineRun(client, n));
                bare.push(await bareRun(context, promptTokens, n));
            }
            const row = {
                model: size,
                n,
                engine_tokens_per_s: percentile(engine, 50),
                bare_tokens_per_s: percentile(bare, 50),
                ratio: percentile(engine, 50) / percentile(bare, 50)
            };
            results.push(row);
            console.log(`${size.padEnd(7)} n=${n}  engine ${row.engine_tokens_per_s.toFixed(1).padStart(7)} tok/s  bare ${row.bare_tokens_per_s.toFixed(1).padStart(7)} tok/s  ratio ${row.ratio.toFixed(3)}`);
        }
        await client.stop();
        await context.dispose();

        // The default thread count is about serving: the engine's own decode at 1 and 4 concurrent requests, with the
        // host in another process (a bare loop alone on the cores is no guide: more llama.cpp threads can win there and
        // lose once the host's work needs a core too).
        for (const t of [1, 2]) {
            const threadClient = new EngineClient({modelPath, threads: t, parallel: 4, contextSize, statsIntervalMs: 1000});
            await threadClient.start();
            await engineRun(threadClient, 1);
            for (const n of [1, 4]) {
                const rates: number[] = [];
                for (let r = 0; r < repeats; r++)
                    rates.push(await engineRun(threadClient, n));
                threadResults.push({model: size, threads: t, n, tokens_per_s: percentile(rates, 50)});
                console.log(`${size.padEnd(7)} threads=${t}  engine decode at n=${n} ${percentile(rates, 50).toFixed(1)} tok/s`);
            }
            await threadClient.stop();
        }
        await model.dispose();
    }

    const scaling = models.map((size) => {
        const byN = (n: number) => results.find((r) => r.model === size && r.n === n)!;
        return {model: size, engine_n8_over_n1: byN(8).engine_tokens_per_s / byN(1).engine_tokens_per_s,
            bare_n8_over_n1: byN(8).bare_tokens_per_s / byN(1).bare_tokens_per_s};
    });
    for (const s of scaling)
        console.log(`${s.model.padEnd(7)} scaling n=8 vs n=1: engine ${s.engine_n8_over_n1.toFixed(2)}x, bare ${s.bare_n8_over_n1.toFixed(2)}x`);
    const bestThreads = models.map((size) => {
        const rows = threadResults.filter((r) => r.model === size && r.n === 4);
        return {model: size, threads: rows.reduce((best, r) => r.tokens_per_s > best.tokens_per_s ? r : best).threads};
    });
    console.log(`min ratio ${Math.min(...results.map((r) => r.ratio)).toFixed(3)} (target >= 0.97); backend ${llama.gpu === false ? "cpu" : llama.gpu}`);
    const report = {backend: llama.gpu === false ? "cpu" : llama.gpu, tokens_per_request: tokens, repeats, threads, results, scaling, thread_results: threadResults, best_threads: bestThreads};
    if (flags.json !== undefined)
        fs.writeFileSync(flags.json, JSON.stringify(report, null, 2) + "\n");
    await llama.dispose();
}

// The bare node-llama-cpp loop runs in this process: on the engine's libuv pool size, as the engine does.
runOnEngineThreadpool(main);
