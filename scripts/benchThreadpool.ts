/**
 * `node --import tsx scripts/benchThreadpool.ts [--repeats R] [--sizes 1,4] [--json FILE]`
 *
 * Why the engine process runs with one libuv thread (`engineThreadpoolSize`): two process-mode engines
 * on the same model, one started with each UV_THREADPOOL_SIZE in `--sizes`, serve the same requests
 * (demo `small` text-only model, 1 llama thread, 64 tokens each, ignore EOS) at 1, 4 and 8 concurrent
 * requests, the engines taking turns. Measured on the host as delivered: output tok/s (tokens over first
 * arrival → last delivery) and the median gap between deliveries. Medians over `--repeats`. A benchmark,
 * not a test: it prints numbers and asserts nothing.
 */
import fs from "node:fs";
import {integerValue} from "../cli/optionValues.js";
import {ensureDemoModel} from "../engine/model/demoModel.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {listValue, positiveInteger, readScriptCommandLine} from "./scriptCommandLine.js";

const flags = readScriptCommandLine({
    name: "bench:threadpool",
    summary: "process-mode engines with different UV_THREADPOOL_SIZEs on the same requests: output tok/s and delivery gaps",
    options: {
        repeats: {type: "string", placeholder: "R", description: "repeats per cell, the median reported (default 5)"},
        sizes: {type: "string", placeholder: "N,…", description: "libuv pool sizes, an engine started with each (default 1,4)"},
        json: {type: "string", placeholder: "FILE", description: "also write the results to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Defaults, from measurement\") and this script's header."
}, (values) => ({
    repeats: integerValue("repeats", values.repeats, 5, 1),
    // Distinct: one engine per size.
    sizes: listValue("sizes", values.sizes, [1, 4], "distinct positive integers separated by commas", positiveInteger, true),
    json: values.json
}));
const {repeats, sizes} = flags;
const concurrencies = [1, 4, 8];
const maxTokens = 64;
const prompt = "Once upon a time, in a small town by the sea, there lived a";

type Run = {tokensPerS: number, deliveryGapMs: number};

async function run(client: EngineClient, n: number, seedBase: number): Promise<Run> {
    const results = await Promise.all(Array.from({length: n}, (_, i) =>
        client.generate({prompt, maxTokens, temperature: 0.8, seed: seedBase + i, ignoreEos: true}).done));
    const start = Math.min(...results.map((r) => r.arrival));
    const end = Math.max(...results.map((r) => r.lastDelivered));
    const tokens = results.reduce((sum, r) => sum + r.tokenTimes.length, 0);
    const gaps = results.flatMap((r) => r.deliveries.slice(1).map((d, i) => d.t - r.deliveries[i]!.t));
    return {tokensPerS: tokens / ((end - start) / 1000), deliveryGapMs: percentile(gaps, 50)};
}

async function main(): Promise<void> {
    const modelPath = await ensureDemoModel({size: "small", textOnly: true});
    const clients = new Map<number, EngineClient>();
    const inherited = process.env.UV_THREADPOOL_SIZE;
    for (const size of sizes) {
        process.env.UV_THREADPOOL_SIZE = String(size); // the engine process inherits it
        const client = new EngineClient({modelPath, threads: 1, parallel: 8, contextSize: 4096, statsIntervalMs: 1000, prefixCache: false});
        await client.start();
        clients.set(size, client);
    }
    if (inherited === undefined) delete process.env.UV_THREADPOOL_SIZE;
    else process.env.UV_THREADPOOL_SIZE = inherited;

    const rows: Array<{concurrency: number, threadpool: number, tokens_per_s: number, delivery_gap_p50_ms: number}> = [];
    for (const client of clients.values())
        await run(client, 4, 0); // warm up
    for (const n of concurrencies) {
        const runs = new Map<number, Run[]>(sizes.map((size) => [size, []]));
        for (let r = 0; r < repeats; r++) {
            // Rotate which engine goes first, so drift in the machine's load hits both alike.
            const order = r % 2 === 0 ? sizes : [...sizes].reverse();
            for (const size of order)
                runs.get(size)!.push(await run(clients.get(size)!, n, r * 100));
        }
        for (const size of sizes) {
            const got = runs.get(size)!;
            const row = {
                concurrency: n, threadpool: size,
                tokens_per_s: percentile(got.map((x) => x.tokensPerS), 50),
                delivery_gap_p50_ms: percentile(got.map((x) => x.deliveryGapMs), 50)
            };
            rows.push(row);
            console.log(`c=${n} UV_THREADPOOL_SIZE=${size}  ${row.tokens_per_s.toFixed(1).padStart(7)} tok/s  ` +
                `delivery gap p50 ${row.delivery_gap_p50_ms.toFixed(2)} ms`);
        }
    }
    for (const client of clients.values())
        await client.stop();
    if (flags.json !== undefined)
        fs.writeFileSync(flags.json, JSON.stringify({model: "small-text", threads: 1, max_tokens: maxTokens, repeats, results: rows}, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
