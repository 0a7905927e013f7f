/**
 * `npm run bench:overhead -- [--pairs N] [--modes process,inProcess] [--num-prompts N] [--random-range-ratio R]
 *     [--max-concurrency N] [--json FILE]`
 *
 * The seed's headline experiment, ours: the serving benchmark with stats OFF (no stats worker, no
 * StatsManager, no loggers — vLLM's --disable-log-stats) and ON (1 s snapshots, StatsManager, the log
 * line, Prometheus /metrics scraped every second, and a simulated panel subscribed at 4 Hz), as
 * interleaved pairs in one run, so machine noise hits both alike. By default every request is sent at
 * once; `--max-concurrency 1` sends one at a time, where each token's delivery is most exposed. Prints the
 * median ratios (targets: output throughput on/off >= 0.99, P99 ITL on/off <= 1.03), each with its 95 %
 * order-statistic interval (medianInterval.ts). A benchmark, not a test.
 */
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import {parseBenchArgs} from "../cli/benchArgs.js";
import {choiceValue, fractionValue, integerValue} from "../cli/optionValues.js";
import {demoModelSizeNames} from "../engine/model/demoModel.js";
import {formatMedianInterval, medianInterval} from "../extension/host/bench/medianInterval.js";
import {runBenchmark, type BenchRun} from "../extension/host/bench/runBenchmark.js";
import type {EngineMode} from "../extension/host/engineClient/engineClient.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {choiceItem, listValue, readScriptCommandLine} from "./scriptCommandLine.js";

const engineModes: readonly EngineMode[] = ["process", "inProcess"];

const values = readScriptCommandLine({
    name: "bench:overhead",
    summary: "what stats collection costs: the serving benchmark with stats off and on, as interleaved pairs",
    options: {
        "pairs": {type: "string", placeholder: "N", description: "off + on pairs per mode, after one warm-up run (default 5)"},
        "modes": {type: "string", placeholder: "MODE,…", description: "engine modes, each its own pairs: process, inProcess (default process,inProcess)"},
        "num-prompts": {type: "string", placeholder: "N", description: "requests per run (default 48)"},
        "input-len": {type: "string", placeholder: "N", description: "prompt length in tokens, approximately (default 32)"},
        "output-len": {type: "string", placeholder: "N", description: "tokens generated per request (default 64)"},
        "random-range-ratio": {type: "string", placeholder: "R",
            description: "each request's lengths drawn from len·(1−R)…len·(1+R), as bench's flag (default 0: all alike)"},
        "max-concurrency": {type: "string", placeholder: "N", description: "most requests in flight (default: all sent at once)"},
        "demo-size": {type: "string", placeholder: "SIZE", description: "the demo model: tiny | small | medium (default small)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the medians and every pair to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\") and this script's header."
}, (given) => {
    const maxConcurrency = given["max-concurrency"];
    return {
        "pairs": integerValue("pairs", given.pairs, 5, 1),
        "modes": listValue("modes", given.modes, ["process", "inProcess"], `${engineModes.join(" or ")}, separated by commas`,
            choiceItem(engineModes)),
        // Passed on to the bench's own flags (cli/benchArgs.ts), checked here as it checks them.
        "num-prompts": String(integerValue("num-prompts", given["num-prompts"], 48, 1)),
        "input-len": String(integerValue("input-len", given["input-len"], 32, 1)),
        "output-len": String(integerValue("output-len", given["output-len"], 64, 1)),
        "random-range-ratio": String(fractionValue("random-range-ratio", given["random-range-ratio"], 0)),
        "max-concurrency": maxConcurrency === undefined ? undefined : String(integerValue("max-concurrency", maxConcurrency, 1, 1)),
        "demo-size": choiceValue("demo-size", given["demo-size"], demoModelSizeNames, "small"),
        "json": given.json
    };
});

async function freePort(): Promise<number> {
    return await new Promise((resolve, reject) => {
        const server = net.createServer();
        server.listen(0, "127.0.0.1", () => {
            const {port} = server.address() as net.AddressInfo;
            server.close(() => resolve(port));
        });
        server.on("error", reject);
    });
}


/**
 * One GET of the exposition with Node's own HTTP client on a kept-alive connection, as a Prometheus
 * server reuses its connection. Not fetch: in in-process mode this client shares the host's thread with
 * the engine's loop, and undici's web streams cost ~1.5 ms per request there, time that a scraper in its
 * own process (Prometheus) never takes from the engine.
 */
const scrapeAgent = new http.Agent({keepAlive: true, maxSockets: 1});
async function scrape(url: string): Promise<number> {
    return await new Promise((resolve, reject) => {
        http.get(url, {agent: scrapeAgent}, (response) => {
            let bytes = 0;
            response.on("data", (piece: Buffer) => bytes += piece.length);
            response.once("end", () => response.statusCode === 200 ? resolve(bytes) : reject(new Error(`HTTP ${response.statusCode}`)));
            response.once("error", reject);
        }).once("error", reject);
    });
}

async function once(mode: EngineMode, stats: boolean): Promise<BenchRun> {
    const args = ["--num-prompts", values["num-prompts"], "--input-len", values["input-len"], "--output-len", values["output-len"],
        "--random-range-ratio", values["random-range-ratio"], "--demo-size", values["demo-size"], "--stats", stats ? "on" : "off", "--stats-interval-ms", "1000", "--no-progress",
        ...(values["max-concurrency"] === undefined ? [] : ["--max-concurrency", values["max-concurrency"]]),
        ...(mode === "inProcess" ? ["--in-process"] : [])];
    const options = parseBenchArgs(args, false);
    let scraper: NodeJS.Timeout | undefined;
    let unsubscribe: (() => void) | undefined;
    let scrapes = 0;
    let deltaBytes = 0;
    const run = await runBenchmark(options, {
        stderr: () => undefined,
        createStatsSession: async (client) => {
            const pipeline = await StatsPipeline.create({
                writeLogLine: () => undefined, logIntervalS: 10, prometheusPort: await freePort()
            });
            pipeline.attach(client);
            const url = pipeline.metricsUrl!;
            scraper = setInterval(() => void scrape(url).then(() => scrapes++, () => undefined), 1000);
            unsubscribe = pipeline.manager.subscribe((delta) => {
                deltaBytes += JSON.stringify(delta).length;
            }, {maxHz: 4});
            return {
                totals: () => pipeline.totals(),
                dispose: async () => {
                    clearInterval(scraper);
                    unsubscribe?.();
                    await pipeline.dispose();
                }
            };
        }
    });
    if (stats && (scrapes === 0 || deltaBytes === 0))
        console.warn(`warning: the stats-on run saw ${scrapes} scrapes and ${deltaBytes} delta bytes`);
    if (run.statsAgreement !== undefined && !run.statsAgreement.ok)
        throw new Error(run.statsAgreement.detail);
    return run;
}

async function main(): Promise<void> {
    const pairs = values.pairs;
    const modes = values.modes;
    const report: Record<string, unknown> = {pairs, workload: {numPrompts: values["num-prompts"], inputLen: values["input-len"], outputLen: values["output-len"],
        rangeRatio: values["random-range-ratio"], maxConcurrency: values["max-concurrency"] ?? "all", model: values["demo-size"]}};
    for (const mode of modes) {
        const throughputRatios: number[] = [];
        const p99ItlRatios: number[] = [];
        const rows: Array<Record<string, number>> = [];
        await once(mode, true); // warm-up (model generation, page cache)
        for (let i = 0; i < pairs; i++) {
            // Alternate which goes first so drift does not favour one side.
            const [off, on] = i % 2 === 0
                ? [await once(mode, false), await once(mode, true)]
                : await (async () => {
                    const first = await once(mode, true);
                    return [await once(mode, false), first] as const;
                })();
            throughputRatios.push(on.metrics.output_throughput / off.metrics.output_throughput);
            p99ItlRatios.push(on.metrics.p99_itl_ms / off.metrics.p99_itl_ms);
            rows.push({off_output_throughput: off.metrics.output_throughput, on_output_throughput: on.metrics.output_throughput,
                off_p99_itl_ms: off.metrics.p99_itl_ms, on_p99_itl_ms: on.metrics.p99_itl_ms,
                off_p99_tpot_ms: off.metrics.p99_tpot_ms, on_p99_tpot_ms: on.metrics.p99_tpot_ms});
            console.log(`${mode} pair ${i + 1}/${pairs}: output tok/s off ${off.metrics.output_throughput.toFixed(1)} on ${on.metrics.output_throughput.toFixed(1)} · ` +
                `P99 ITL off ${off.metrics.p99_itl_ms.toFixed(2)} ms on ${on.metrics.p99_itl_ms.toFixed(2)} ms`);
        }
        const throughput = medianInterval(throughputRatios);
        const p99Itl = medianInterval(p99ItlRatios);
        const summary = {
            median_output_throughput_ratio: throughput.median,
            median_p99_itl_ratio: p99Itl.median,
            // The medians' distribution-free confidence intervals (medianInterval.ts).
            output_throughput_ratio_interval: throughput,
            p99_itl_ratio_interval: p99Itl,
            pairs: rows
        };
        report[mode] = summary;
        console.log(`${mode}: median output throughput on/off ${formatMedianInterval(throughput)} (target >= 0.99), ` +
            `median P99 ITL on/off ${formatMedianInterval(p99Itl)} (target <= 1.03)`);
    }
    if (values.json !== undefined)
        fs.writeFileSync(values.json, JSON.stringify(report, null, 2) + "\n");
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
