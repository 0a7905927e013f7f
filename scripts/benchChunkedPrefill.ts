/**
 * `npm run bench:prefill -- [--repeats N] [--prompt-words N] [--chunks 32,8] [--dtype f16|q8_0|q4_0] [--json FILE]`
 *
 * What a long prompt does to the requests already generating (issue F §3, chunked prefill): three
 * requests decode on the demo `small` model (1 thread, 4 sequences, process mode as the product runs);
 * their inter-token gaps are measured on host-delivered tokens for 2 s of steady state, then a prompt of
 * ~2000 tokens arrives and their gaps are measured again until its first token. P99 of each window and
 * the ratio (target ≤ 2), with chunked prefill (the default budget) and without it (the whole prompt in
 * one step, node-llama-cpp splitting it only at its 512-token batch), as interleaved repeats. `--dtype`:
 * the demo model's weights (default f16). On the 2-vCPU VM a chunk's step grows with the prompt's position
 * on q4_0 as on f16 (attention over the f16 KV cache leads the profile), see README "Defaults". A
 * benchmark, not a test.
 */
import fs from "node:fs";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {Xoshiro128} from "../common/seededRandom.js";
import {demoModelDtypes, ensureDemoModel} from "../engine/model/demoModel.js";
import {makePrompt} from "../extension/host/bench/workload.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {defaultPrefillChunkTokens} from "../protocol/engineOptions.js";
import {listValue, positiveInteger, readScriptCommandLine} from "./scriptCommandLine.js";

const flags = readScriptCommandLine({
    name: "bench:prefill",
    summary: "what a ~2000-token prompt's prefill does to the ITL of three running requests, chunked and not",
    options: {
        "repeats": {type: "string", placeholder: "N", description: "interleaved repeats of every chunk setting (default 3)"},
        "prompt-words": {type: "string", placeholder: "N", description: "words in the long prompt (default 1100, ~2000 tokens)"},
        "chunks": {type: "string", placeholder: "N,N…",
            description: `prefill chunk budgets in tokens, each run beside no chunking (default ${defaultPrefillChunkTokens("cpu")}, the CPU default)`},
        "dtype": {type: "string", placeholder: "D", description: `the demo model's weights: ${demoModelDtypes.join(" | ")} (default f16)`},
        "json": {type: "string", placeholder: "FILE", description: "also write the summary and every run to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\", \"Defaults, from measurement\") and this script's header."
}, (values) => ({
    json: values.json,
    repeats: integerValue("repeats", values.repeats, 3, 1),
    promptWords: integerValue("prompt-words", values["prompt-words"], 1100, 1),
    chunks: listValue("chunks", values.chunks, [defaultPrefillChunkTokens("cpu")], "positive integers separated by commas", positiveInteger),
    dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16")
}));
const {dtype} = flags;

const noChunking = 1 << 20;
const running = 3;

type Window = {itls: number[], p99: number, median: number};
type Run = {chunkTokens: number, longPromptTokens: number, steady: Window, duringPrefill: Window, ratioP99: number, longTtftMs: number};

function window(itls: number[]): Window {
    return {itls, p99: percentile(itls, 99), median: percentile(itls, 50)};
}

async function sleep(ms: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
}

async function measure(modelPath: string, chunkTokens: number, longPrompt: string): Promise<Run> {
    const client = new EngineClient({modelPath, threads: 1, parallel: 4, contextSize: 4096, statsIntervalMs: 0,
        prefillChunkTokens: chunkTokens});
    await client.start();
    try {
        const deliveries: number[][] = [];
        const handles = Array.from({length: running}, (_, i) => {
            const times: number[] = [];
            deliveries.push(times);
            const handle = client.generate({prompt: `once upon a time ${i}`, maxTokens: 3500, ignoreEos: true, temperature: 0.8});
            handle.onChunk((chunk) => times.push(chunk.deliveredAt));
            return handle;
        });
        const gapsIn = (from: number, to: number): number[] => deliveries.flatMap((times) => {
            const gaps: number[] = [];
            for (let i = 1; i < times.length; i++)
                if (times[i]! > from && times[i]! <= to) gaps.push(times[i]! - times[i - 1]!);
            return gaps;
        });
        await sleep(1000); // all three decoding together
        const steadyFrom = performance.timeOrigin + performance.now();
        await sleep(2000);
        const arrival = performance.timeOrigin + performance.now();
        const long = client.generate({prompt: longPrompt, maxTokens: 4, ignoreEos: true, temperature: 0.8});
        let firstToken = 0;
        long.onChunk((chunk) => {
            firstToken ||= chunk.deliveredAt;
        });
        const longResult = await long.done;
        for (const handle of handles)
            handle.cancel();
        await Promise.all(handles.map((handle) => handle.done));
        if (longResult.reason !== "length" || firstToken === 0)
            throw new Error(`the long request ended with ${longResult.reason}: ${longResult.error ?? ""}`);
        const steady = window(gapsIn(steadyFrom, arrival));
        const duringPrefill = window(gapsIn(arrival, firstToken));
        return {chunkTokens, longPromptTokens: longResult.promptTokens, steady, duringPrefill, ratioP99: duringPrefill.p99 / steady.p99,
            longTtftMs: firstToken - arrival};
    } finally {
        await client.stop();
    }
}

async function main(): Promise<void> {
    const modelPath = await ensureDemoModel({size: "small", dtype});
    const longPrompt = makePrompt(new Xoshiro128(7), flags.promptWords);
    const settings = [...flags.chunks, noChunking];
    const runs: Run[] = [];
    const repeats = flags.repeats;
    for (let r = 0; r < repeats; r++) {
        for (const chunk of r % 2 === 0 ? settings : settings.toReversed()) {
            const run = await measure(modelPath, chunk, longPrompt);
            runs.push(run);
            console.log(`repeat ${r + 1}/${repeats}, ${chunk === noChunking ? "no chunking" : `chunk ${chunk}`}: ` +
                `${run.longPromptTokens}-token prompt, its TTFT ${run.longTtftMs.toFixed(0)} ms · running requests' ITL P99 steady ` +
                `${run.steady.p99.toFixed(1)} ms (median ${run.steady.median.toFixed(1)}), during its prefill ${run.duringPrefill.p99.toFixed(1)} ms ` +
                `(median ${run.duringPrefill.median.toFixed(1)}, ${run.duringPrefill.itls.length} gaps) → ratio ${run.ratioP99.toFixed(2)}`);
        }
    }
    const summary = settings.map((chunk) => {
        const mine = runs.filter((run) => run.chunkTokens === chunk);
        return {
            chunk_tokens: chunk === noChunking ? null : chunk,
            median_ratio_p99: percentile(mine.map((run) => run.ratioP99), 50),
            median_steady_p99_ms: percentile(mine.map((run) => run.steady.p99), 50),
            median_prefill_p99_ms: percentile(mine.map((run) => run.duringPrefill.p99), 50),
            median_long_ttft_ms: percentile(mine.map((run) => run.longTtftMs), 50)
        };
    });
    for (const s of summary)
        console.log(`${s.chunk_tokens === null ? "no chunking" : `chunk ${s.chunk_tokens}`}: median P99 ITL ratio (during prefill / steady) ` +
            `${s.median_ratio_p99.toFixed(2)} (${s.median_prefill_p99_ms.toFixed(1)} / ${s.median_steady_p99_ms.toFixed(1)} ms), ` +
            `long prompt TTFT ${s.median_long_ttft_ms.toFixed(0)} ms`);
    if (flags.json !== undefined)
        fs.writeFileSync(flags.json, JSON.stringify({summary, runs: runs.map(({steady, duringPrefill, ...rest}) => ({
            ...rest, steady_p99_ms: steady.p99, steady_median_ms: steady.median,
            prefill_p99_ms: duringPrefill.p99, prefill_median_ms: duringPrefill.median
        }))}, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
