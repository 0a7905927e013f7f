import path from "node:path";
import {Xoshiro128, nextUnit} from "../common/seededRandom.js";
import {computeBenchMetrics, formatBenchTable} from "../extension/host/bench/benchMetrics.js";
import {makePrompt, nextArrivalGapS} from "../extension/host/bench/workload.js";
import {DashboardServer} from "../extension/host/dashboard/dashboardServer.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import type {RequestResult} from "../extension/host/engineClient/requestState.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {demoCommandLine, demoOptionsFrom} from "./demoArgs.js";
import {serverStartFailure} from "./serverStartFailure.js";
import {warnGpuFallbacks} from "./gpuFallbackWarnings.js";
import {errorMessage} from "../common/errorMessage.js";
import {formatCount} from "../common/format.js";

/**
 * `inference-monitor demo`: the engine on the built-in model (or --model), a varied workload (mixed
 * lengths and priorities, some requests cancelled), vLLM's log line every 10 s, and the live
 * dashboard at the printed URL. Stops on Ctrl-C or after --duration and prints the benchmark table.
 */
export async function demoCommand(args: string[], io: CliIo): Promise<number> {
    const commandLine = readCommandLine(demoCommandLine, args, io, demoOptionsFrom);
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    let pipeline: StatsPipeline;
    try {
        pipeline = await StatsPipeline.create({writeLogLine: (line) => io.stdout(`${line}\n`), logIntervalS: options.logIntervalS, prometheusPort: options.prometheusPort});
    } catch (error) {
        io.stderr(`${serverStartFailure(error, "--prometheus-port", "none")}\n`);
        return 1;
    }
    let dashboard: DashboardServer;
    let engineReadyAt: number | undefined;
    try {
        dashboard = await DashboardServer.listen({port: options.port, source: pipeline.manager, webviewDir: path.join(__dirname, "webview"),
            engineStartedAt: () => engineReadyAt});
    } catch (error) {
        await pipeline.dispose();
        io.stderr(`${serverStartFailure(error, "--port", "a free one")}\n`);
        return 1;
    }
    const client = new EngineClient({mode: options.inProcess ? "inProcess" : "process", gpu: options.gpu, ...(options.modelPath !== undefined ? {modelPath: options.modelPath} : {})});
    pipeline.attach(client);
    io.stdout(`Dashboard: ${dashboard.url}\n`);
    if (pipeline.metricsUrl !== undefined)
        io.stdout(`Prometheus metrics: ${pipeline.metricsUrl}\n`);
    io.stdout(`Loading ${options.modelPath ?? "the built-in demo model"}…\n`);
    try {
        const info = await client.start();
        engineReadyAt = Date.now();
        warnGpuFallbacks(info, io);
        io.stdout(`Engine ready: ${info.model.name}, ${info.backend.toUpperCase()}, context ${info.contextSize}, ${formatCount(info.parallel, "sequence")}, ${formatCount(info.threads, "thread")}. ` +
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
    const ledger = pipeline.manager.counters().requests;
    io.stdout(`Requests: ${ledger.arrived} arrived, ${ledger.completed} completed, ${ledger.aborted} cancelled, ${ledger.failed} failed\n`);
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
        const handle = client.generate({prompt: makePrompt(rng, promptLen), maxTokens, priority, ignoreEos: true, client: "demo"});
        handles.add(handle);
        if (nextUnit(rng) < 0.08)
            setTimeout(() => handle.cancel(), 200 + nextUnit(rng) * 1500);
        pending.push(handle.done.finally(() => handles.delete(handle)));
    }
    for (const handle of handles)
        handle.cancel();
    return await Promise.all(pending);
}
