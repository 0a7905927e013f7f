/**
 * `npm run bench:prefill -- [--repeats N] [--prompt-words N] [--long-prompts N] [--chunks 32,8] [--dtype f16|q8_0|q4_0]
 *   [--llama-server on|off] [--json FILE]`
 *
 * What a long prompt does to the requests already generating (issue F §3, chunked prefill): three
 * requests (one per sequence it leaves) decode on the demo `small` model (1 thread, 4 sequences, process mode as the product runs);
 * their inter-token gaps are measured on host-delivered tokens for 2 s of steady state, then a prompt of
 * ~2000 tokens arrives and their gaps are measured again until its first token (every gap that overlaps that
 * window, so also the one that ends with it). P99 of each window and the ratio (target ≤ 2), with chunked
 * prefill (the default budget) and without it (the whole prompt in one step, node-llama-cpp splitting it
 * only at its 512-token batch), and the same requests against llama.cpp's `llama-server` on the same model
 * (its own scheduling: each batch of up to 2048 prompt tokens goes with one token of every running request;
 * `bash .ci/build-llama-server.sh` builds it), as interleaved repeats. `--long-prompts 2` sends two long prompts
 * together (two requests run then): with the budget served first come, first served the first is done about when it
 * would be alone, and the second after it. `--dtype`: the demo model's weights
 * (default f16). On the 2-vCPU VM a chunk's step grows with the prompt's position on q4_0 as on f16 (attention
 * over the f16 KV cache leads the profile), see README "Defaults". A benchmark, not a test.
 */
import fs from "node:fs";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {Xoshiro128} from "../common/seededRandom.js";
import {demoModelDtypes, ensureDemoModel} from "../engine/model/demoModel.js";
import {OpenAiHttpTarget} from "../extension/host/bench/openaiHttpTarget.js";
import {makePrompt} from "../extension/host/bench/workload.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {defaultPrefillChunkTokens, maxPrefillChunkTokens} from "../protocol/engineOptions.js";
import {buildLlamaServer, servingArgs, startLlamaServer} from "./llamaServer.js";
import {listValue, positiveInteger, readScriptCommandLine} from "./scriptCommandLine.js";

const threads = 1;
const sequences = 4;

const flags = readScriptCommandLine({
    name: "bench:prefill",
    summary: "what a ~2000-token prompt's prefill does to the ITL of the running requests: ours chunked and not, and llama-server",
    options: {
        "repeats": {type: "string", placeholder: "N", description: "interleaved repeats of every setting (default 3)"},
        "prompt-words": {type: "string", placeholder: "N", description: "words in each long prompt (default 1100, ~2000 tokens)"},
        "long-prompts": {type: "string", placeholder: "N",
            description: `long prompts arriving together, 1 to ${sequences - 1}; the other sequences run requests (default 1)`},
        "chunks": {type: "string", placeholder: "N,N…",
            description: `prefill chunk budgets in tokens, each run beside no chunking (default ${defaultPrefillChunkTokens("cpu")}, the CPU default)`},
        "dtype": {type: "string", placeholder: "D", description: `the demo model's weights: ${demoModelDtypes.join(" | ")} (default f16)`},
        "llama-server": {type: "string", placeholder: "on|off", description: "also run llama.cpp's llama-server on the same requests (default on)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the summary and every run to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\", \"Defaults, from measurement\") and this script's header."
}, (values) => ({
    json: values.json,
    repeats: integerValue("repeats", values.repeats, 3, 1),
    promptWords: integerValue("prompt-words", values["prompt-words"], 1100, 1),
    longPrompts: integerValue("long-prompts", values["long-prompts"], 1, 1, sequences - 1),
    chunks: listValue("chunks", values.chunks, [defaultPrefillChunkTokens("cpu")], "positive integers separated by commas", positiveInteger),
    dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16"),
    llamaServer: choiceValue("llama-server", values["llama-server"], ["on", "off"], "on") === "on"
}));
const {dtype} = flags;

const contextPerSequence = 4096;
const temperature = 0.8;
/** Requests generating when the long prompts arrive: one on each sequence they leave. */
const running = sequences - flags.longPrompts;
/** llama-server's flags after `-m MODEL --host 127.0.0.1 --port P`: bench:peer's, for this workload's shape. */
const llamaServerArgs = [...servingArgs({threads, parallel: sequences, contextPerSequence}), "--min-p", "0"];

/** A run's setting: ours with a chunk budget (null: none, the whole prompt in one step), or llama-server. */
type Setting = {target: "ours", chunkTokens: number | null} | {target: "llama-server"};
const settingName = (setting: Setting): string =>
    setting.target === "llama-server" ? "llama-server" : setting.chunkTokens === null ? "ours, no chunking" : `ours, chunk ${setting.chunkTokens}`;

type Window = {itls: number[], p99: number, median: number};
/** `longTtftsMs`: each long prompt's TTFT, in the order they were sent; the prefill window ends with the last first token. */
/** `prefillGaps`: each running request's gaps that overlap the prefill, in order. */
type Run = {
    setting: Setting, longPromptTokens: number[], steady: Window, duringPrefill: Window, prefillGaps: number[][], ratioP99: number,
    longTtftsMs: number[]
};

function window(itls: number[]): Window {
    return {itls, p99: percentile(itls, 99), median: percentile(itls, 50)};
}

async function sleep(ms: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
}

/** A streamed generation: its tokens' delivery times (host clock) as they come, and how it ended. */
type Stream = {deliveries: number[], done: Promise<{ended: string, promptTokens: number}>, cancel(): void};
/** How a request ended (`length`, `abort`, or an error with its message) and its prompt's length. */
function streamEnd(result: {reason: string, error?: string, promptTokens: number}): {ended: string, promptTokens: number} {
    return {ended: result.reason + (result.error !== undefined ? `: ${result.error}` : ""), promptTokens: result.promptTokens};
}

/** A server under test, started for one run. */
type Server = {stream(prompt: string, maxTokens: number): Stream, stop(): Promise<void>};

/** Our engine over IPC (process mode), with the given chunk budget (null: none). */
async function startOurs(modelPath: string, chunkTokens: number | null): Promise<Server> {
    const client = new EngineClient({modelPath, threads, parallel: sequences, contextSize: contextPerSequence, statsIntervalMs: 0,
        prefillChunkTokens: chunkTokens ?? maxPrefillChunkTokens});
    await client.start();
    return {
        stream: (prompt, maxTokens) => {
            const deliveries: number[] = [];
            const handle = client.generate({prompt, maxTokens, ignoreEos: true, temperature});
            handle.onChunk((chunk) => {
                if (chunk.tokens > 0)
                    deliveries.push(chunk.deliveredAt);
            });
            return {deliveries, cancel: () => handle.cancel(), done: handle.done.then(streamEnd)};
        },
        stop: () => client.stop()
    };
}

/** llama-server on the same model, through the benchmark's own streaming client (`/v1/completions`). */
async function startLlamaServerTarget(binary: string, modelPath: string): Promise<Server> {
    const server = await startLlamaServer({binary, model: modelPath, args: llamaServerArgs});
    const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions"});
    let seed = 0;
    return {
        stream: (prompt, maxTokens) => {
            const sent = target.send({prompt, maxTokens, seed: seed++, temperature});
            // The client records its deliveries on the result it resolves with; read them live through it.
            const deliveries: number[] = [];
            const done = sent.done.then((result) => {
                deliveries.splice(0, deliveries.length, ...result.deliveries.filter((d) => d.tokens > 0).map((d) => d.t));
                return streamEnd(result);
            });
            return {deliveries, done, cancel: () => sent.cancel()};
        },
        stop: async () => {
            target.close();
            await server.stop();
        }
    };
}

async function measure(server: Server, setting: Setting, longPrompts: readonly string[]): Promise<Run> {
    const streams = Array.from({length: running}, (_, i) => server.stream(`once upon a time ${i}`, 3500));
    await sleep(1000); // all of them decoding together
    const steadyFrom = performance.timeOrigin + performance.now();
    await sleep(2000);
    const arrival = performance.timeOrigin + performance.now();
    const longs = longPrompts.map((prompt) => server.stream(prompt, 4));
    const longResults = await Promise.all(longs.map((long) => long.done));
    for (const stream of streams)
        stream.cancel();
    const ends = await Promise.all(streams.map((stream) => stream.done));
    const firstTokens = longs.map((long) => long.deliveries[0]);
    for (const [i, result] of longResults.entries())
        if (!result.ended.startsWith("length") || firstTokens[i] === undefined)
            throw new Error(`${settingName(setting)}: a long request ended with ${result.ended}`);
    const lastFirstToken = Math.max(...firstTokens.map((t) => t!));
    for (const end of ends)
        if (!end.ended.startsWith("abort"))
            throw new Error(`${settingName(setting)}: a running request ended before it was cancelled: ${end.ended}`);
    // Every gap that overlaps the window, also the one it ends inside: a running request stalled by the whole prompt
    // gets its next token only with (or after) the long prompt's first, and that stall is what the window is about.
    const streamGapsIn = (from: number, to: number): number[][] => streams.map(({deliveries: times}) => {
        const gaps: number[] = [];
        for (let i = 1; i < times.length; i++)
            if (times[i]! > from && times[i - 1]! < to) gaps.push(times[i]! - times[i - 1]!);
        return gaps;
    });
    const steady = window(streamGapsIn(steadyFrom, arrival).flat());
    const prefillGaps = streamGapsIn(arrival, lastFirstToken);
    const duringPrefill = window(prefillGaps.flat());
    return {setting, longPromptTokens: longResults.map((result) => result.promptTokens), steady, duringPrefill, prefillGaps,
        ratioP99: duringPrefill.p99 / steady.p99, longTtftsMs: firstTokens.map((t) => t! - arrival)};
}

async function main(): Promise<void> {
    // The text-only variant, as bench:peer: llama-server rejects a stream where the plain one's byte tokens split a character.
    const modelPath = await ensureDemoModel({size: "small", textOnly: true, dtype});
    const binary = flags.llamaServer ? await buildLlamaServer() : undefined;
    const longPrompts = Array.from({length: flags.longPrompts}, (_, i) => makePrompt(new Xoshiro128(7 + i), flags.promptWords));
    const settings: Setting[] = [...flags.chunks.map((chunkTokens): Setting => ({target: "ours", chunkTokens})),
        {target: "ours", chunkTokens: null}, ...binary !== undefined ? [{target: "llama-server"} as const] : []];
    const runs: Run[] = [];
    const repeats = flags.repeats;
    for (let r = 0; r < repeats; r++) {
        for (const setting of r % 2 === 0 ? settings : settings.toReversed()) {
            const server = setting.target === "ours" ? await startOurs(modelPath, setting.chunkTokens)
                : await startLlamaServerTarget(binary!, modelPath);
            let run: Run;
            try {
                run = await measure(server, setting, longPrompts);
            } finally {
                await server.stop();
            }
            runs.push(run);
            console.log(`repeat ${r + 1}/${repeats}, ${settingName(setting)}: ` +
                `${run.longPromptTokens.join(" + ")}-token prompt${run.longPromptTokens.length > 1 ? "s" : ""}, ` +
                `TTFT ${run.longTtftsMs.map((t) => t.toFixed(0)).join(" / ")} ms · running requests' ITL P99 steady ` +
                `${run.steady.p99.toFixed(1)} ms (median ${run.steady.median.toFixed(1)}), during its prefill ${run.duringPrefill.p99.toFixed(1)} ms ` +
                `(median ${run.duringPrefill.median.toFixed(1)}, ${run.duringPrefill.itls.length} gaps) → ratio ${run.ratioP99.toFixed(2)}`);
        }
    }
    const summary = settings.map((setting) => {
        const mine = runs.filter((run) => settingName(run.setting) === settingName(setting));
        return {
            setting: settingName(setting),
            target: setting.target,
            chunk_tokens: setting.target === "ours" ? setting.chunkTokens : null,
            median_ratio_p99: percentile(mine.map((run) => run.ratioP99), 50),
            median_steady_p99_ms: percentile(mine.map((run) => run.steady.p99), 50),
            median_prefill_p99_ms: percentile(mine.map((run) => run.duringPrefill.p99), 50),
            median_long_ttft_ms: percentile(mine.map((run) => run.longTtftsMs[0]!), 50),
            median_last_long_ttft_ms: percentile(mine.map((run) => Math.max(...run.longTtftsMs)), 50)
        };
    });
    for (const s of summary)
        console.log(`${s.setting}: median P99 ITL ratio (during prefill / steady) ` +
            `${s.median_ratio_p99.toFixed(2)} (${s.median_prefill_p99_ms.toFixed(1)} / ${s.median_steady_p99_ms.toFixed(1)} ms), ` +
            `long prompt TTFT ${s.median_long_ttft_ms.toFixed(0)} ms` +
            (flags.longPrompts > 1 ? `, the last one's ${s.median_last_long_ttft_ms.toFixed(0)} ms` : ""));
    const peer = summary.find((s) => s.target === "llama-server");
    if (peer !== undefined)
        for (const s of summary.filter((s) => s.target === "ours"))
            console.log(`${s.setting} / llama-server: running requests' P99 ITL during the prefill ` +
                `${(s.median_prefill_p99_ms / peer.median_prefill_p99_ms).toFixed(3)}×, long prompt TTFT ` +
                `${(s.median_long_ttft_ms / peer.median_long_ttft_ms).toFixed(3)}×` +
                (flags.longPrompts > 1 ? `, the last one's ${(s.median_last_long_ttft_ms / peer.median_last_long_ttft_ms).toFixed(3)}×` : ""));
    if (flags.json !== undefined)
        fs.writeFileSync(flags.json, JSON.stringify({summary, runs: runs.map(({setting, steady, duringPrefill, prefillGaps, ...rest}) => ({
            setting: settingName(setting), ...rest, steady_p99_ms: steady.p99, steady_median_ms: steady.median,
            prefill_p99_ms: duringPrefill.p99, prefill_median_ms: duringPrefill.median,
            prefill_gaps_ms: prefillGaps.map((gaps) => gaps.map((gap) => Math.round(gap * 10) / 10))
        }))}, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
