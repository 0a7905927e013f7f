import path from "node:path";
import {parseArgs} from "node:util";
import {Xoshiro128, nextUnit} from "../common/seededRandom.js";
import {computeBenchMetrics, formatBenchTable} from "../extension/host/bench/benchMetrics.js";
import {makePrompt, nextArrivalGapS} from "../extension/host/bench/workload.js";
import {DashboardServer} from "../extension/host/dashboard/dashboardServer.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import type {RequestResult} from "../extension/host/engineClient/requestHandle.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import type {CliIo} from "./benchCommand.js";
import {errorMessage} from "../common/errorMessage.js";

const demoUsage = `Usage: inference-monitor demo [options]

  --model FILE          GGUF model (default: the built-in demo model)
  --port N              dashboard port on 127.0.0.1 (default 0 = a free one)
  --duration S          seconds to run (default 60; Ctrl-C stops earlier)
  --rate R              request arrivals per second (default 3)
  --prometheus-port N   also serve /metrics (default 0 = off)
  --log-interval S      seconds between vLLM log lines (default 10)
  --in-process          run the engine inside this process
`;

type DemoOptions = {modelPath?: string, port: number, durationS: number, rate: number, prometheusPort: number, logIntervalS: number, inProcess: boolean};

function parseDemoArgs(args: string[]): DemoOptions | string {
    let values;
    try {
        values = parseArgs({args, strict: true, allowPositionals: false, options: {
            "model": {type: "string"}, "port": {type: "string"}, "duration": {type: "string"}, "rate": {type: "string"},
            "prometheus-port": {type: "string"}, "log-interval": {type: "string"}, "in-process": {type: "boolean"}
        }}).values;
    } catch (error) {
        return errorMessage(error);
    }
    const number = (name: string, raw: string | undefined, fallback: number, ok: (n: number) => boolean) => {
        if (raw === undefined) return fallback;
        const n = Number(raw);
        return ok(n) ? n : `--${name}: bad value ${JSON.stringify(raw)}`;
    };
    const port = number("port", values.port, 0, (n) => Number.isInteger(n) && n >= 0 && n <= 65535);
    const durationS = number("duration", values.duration, 60, (n) => Number.isFinite(n) && n > 0);
    const rate = number("rate", values.rate, 3, (n) => Number.isFinite(n) && n > 0);
    const prometheusPort = number("prometheus-port", values["prometheus-port"], 0, (n) => Number.isInteger(n) && n >= 0 && n <= 65535);
    const logIntervalS = number("log-interval", values["log-interval"], 10, (n) => Number.isFinite(n) && n > 0);
    for (const value of [port, durationS, rate, prometheusPort, logIntervalS])
        if (typeof value === "string")
            return value;
    return {
        port: port as number, durationS: durationS as number, rate: rate as number, prometheusPort: prometheusPort as number, logIntervalS: logIntervalS as number,
        inProcess: values["in-process"] === true, ...(values.model !== undefined ? {modelPath: values.model} : {})
    };
}

/**
 * `inference-monitor demo`: the engine on the built-in model (or --model), a varied workload (mixed
 * lengths and priorities, some requests cancelled), vLLM's log line every 10 s, and the live
 * dashboard at the printed URL. Stops on Ctrl-C or after --duration and prints the benchmark table.
 */
export async function demoCommand(args: string[], io: CliIo): Promise<number> {
    if (args.includes("--help") || args.includes("-h")) {
        io.stdout(demoUsage);
        return 0;
    }
    const options = parseDemoArgs(args);
    if (typeof options === "string") {
        io.stderr(`${options}\n\n${demoUsage}`);
        return 2;
    }
    let pipeline: StatsPipeline;
    try {
        pipeline = await StatsPipeline.create({writeLogLine: (line) => io.stdout(`${line}\n`), logIntervalS: options.logIntervalS, prometheusPort: options.prometheusPort});
    } catch (error) {
        io.stderr(`${errorMessage(error)}\n`);
        return 1;
    }
    let dashboard: DashboardServer;
    let engineReadyAt: number | undefined;
    try {
        dashboard = await DashboardServer.listen({port: options.port, source: pipeline.manager, webviewDir: path.join(__dirname, "webview"),
            engineStartedAt: () => engineReadyAt});
    } catch (error) {
        await pipeline.dispose();
        io.stderr(`${errorMessage(error)}\n`);
        return 1;
    }
    const client = new EngineClient({mode: options.inProcess ? "inProcess" : "process", ...(options.modelPath !== undefined ? {modelPath: options.modelPath} : {})});
    pipeline.attach(client);
    io.stdout(`Dashboard: ${dashboard.url}\n`);
    if (pipeline.metricsUrl !== undefined)
        io.stdout(`Prometheus metrics: ${pipeline.metricsUrl}\n`);
    io.stdout(`Loading ${options.modelPath ?? "the built-in demo model"}…\n`);
    try {
        const info = await client.start();
        engineReadyAt = Date.now();
        io.stdout(`Engine ready: ${info.model.name}, ${info.backend.toUpperCase()}, context ${info.contextSize}, ${info.parallel} sequences, ${info.threads} threads. ` +
            `Running for ${options.durationS} s (Ctrl-C to stop).\n`);
    } catch (error) {
        io.stderr(`Could not start the engine: ${errorMessage(error)}\n`);
        await dashboard.close();
        await pipeline.dispose();
        return 1;
    }

    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    const timer = setTimeout(onSignal, options.durationS * 1000);
    const started = performance.now();
    const results = await driveMixedWorkload(client, options.rate, stop.signal);
    clearTimeout(timer);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);

    // Cancelled requests (the workload cancels some, and stopping cancels the rest) are not failures.
    const served = results.filter((result) => result.reason !== "abort");
    io.stdout(`${formatBenchTable(computeBenchMetrics(served, (performance.now() - started) / 1000))}\n`);
    const ledger = client.ledger;
    io.stdout(`Requests: ${ledger.arrived} arrived, ${ledger.byReason.stop + ledger.byReason.length} completed, ${ledger.byReason.abort} cancelled, ${ledger.byReason.error} failed\n`);
    await client.stop();
    await dashboard.close();
    await pipeline.dispose();
    return 0;
}

/** Mixed lengths and priorities, ~8% cancelled mid-flight; sends until `signal`, then cancels what is left. */
async function driveMixedWorkload(client: EngineClient, rate: number, signal: AbortSignal): Promise<RequestResult[]> {
    const rng = new Xoshiro128(42);
    const pending: Array<Promise<RequestResult>> = [];
    const handles = new Set<{cancel(): void}>();
    while (!signal.aborted) {
        const gap = nextArrivalGapS(rng, rate);
        await new Promise<void>((resolve) => {
            const onAbort = () => {
                clearTimeout(timer);
                resolve();
            };
            const timer = setTimeout(() => {
                signal.removeEventListener("abort", onAbort);
                resolve();
            }, gap * 1000);
            signal.addEventListener("abort", onAbort, {once: true});
        });
        if (signal.aborted)
            break;
        const promptLen = 8 + Math.floor(nextUnit(rng) * 120);
        const maxTokens = 16 + Math.floor(nextUnit(rng) ** 2 * 240);
        const priority = nextUnit(rng) < 0.1 ? 1 : 0;
        const handle = client.generate({prompt: makePrompt(rng, promptLen), maxTokens, priority, ignoreEos: true});
        handles.add(handle);
        if (nextUnit(rng) < 0.08)
            setTimeout(() => handle.cancel(), 200 + nextUnit(rng) * 1500);
        pending.push(handle.done.finally(() => handles.delete(handle)));
    }
    for (const handle of handles)
        handle.cancel();
    return await Promise.all(pending);
}
