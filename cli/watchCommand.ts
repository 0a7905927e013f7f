import path from "node:path";
import {DashboardServer} from "../extension/host/dashboard/dashboardServer.js";
import {Registry} from "prom-client";
import {VllmMetrics} from "../extension/host/stats/loggers/prometheusMetrics.js";
import {PrometheusStatLogger} from "../extension/host/stats/loggers/prometheusStatLogger.js";
import {StatsManager} from "../extension/host/stats/statsManager.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {TargetMonitor} from "../extension/host/targets/targetMonitor.js";
import type {TargetReplicaView} from "../protocol/targetView.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {serverStartFailure} from "./serverStartFailure.js";
import {watchCommandLine, watchOptionsFrom} from "./watchArgs.js";

/**
 * `inference-monitor watch URL…`: polls running servers and serves the live dashboard (all of them
 * merged) and our `/metrics` (vLLM names, one `engine` label value per URL, in the order given) for
 * them on one port, until Ctrl-C. Prints each server's state when it changes.
 */
export async function watchCommand(args: string[], io: CliIo): Promise<number> {
    const commandLine = readCommandLine(watchCommandLine, args, io, (values, urls) => watchOptionsFrom(values, urls));
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    const pipeline = await StatsPipeline.create({
        writeLogLine: (line) => io.stderr(`${line}\n`), logIntervalS: options.logIntervalS,
        // A poll is the step here: "stalled" only when tokens stop moving for several polls.
        stallThresholdMs: Math.max(3000, 3 * options.intervalMs)
    });
    const metrics = new VllmMetrics(new Registry());
    const printed = new Map<string, string>();
    // /metrics: one `engine` label value per watched URL (its own manager), like vLLM's ranks. The one
    // monitor reads each server once per interval and feeds both the merged view and these.
    const perServer = options.urls.map(() => new StatsManager({stallThresholdMs: Math.max(3000, 3 * options.intervalMs)}));
    const monitor = new TargetMonitor({
        targets: options.urls.map((url) => ({url, kind: options.kind, ...(options.apiKey !== undefined ? {apiKey: options.apiKey} : {})})),
        intervalMs: options.intervalMs,
        sink: {
            onEngineState: (state) => pipeline.manager.onEngineState(state),
            onOutputs: (step) => pipeline.manager.onOutputs(step),
            onTarget: (view) => {
                pipeline.manager.onTarget(view);
                for (const replica of view?.replicas ?? []) {
                    const line = describe(replica);
                    if (printed.get(replica.name) !== line && replica.status !== "connecting")
                        io.stdout(`${line}\n`);
                    printed.set(replica.name, line);
                }
            }
        },
        targetSinks: perServer
    });
    await monitor.pollOnce(); // names the models for their series
    await Promise.all(perServer.map(async (manager, engineIndex) => {
        const model = monitor.view(engineIndex).replicas[0]?.model ?? undefined;
        const named = model !== undefined ? {modelName: model} : {};
        manager.addLogger(await PrometheusStatLogger.start({serve: false, sharedMetrics: metrics, engineIndex, ...named}));
    }));
    let dashboard: DashboardServer;
    try {
        dashboard = await DashboardServer.listen({
            port: options.port, source: pipeline.manager, webviewDir: path.join(__dirname, "webview"), title: "Inference Monitor · watch",
            // Several servers: each browser picks all of them merged (first) or one.
            ...(options.urls.length > 1 ? {choices: () => [
                {key: "merged", label: `All ${options.urls.length} servers (merged)`, source: pipeline.manager},
                ...perServer.map((manager, i) => ({key: options.urls[i]!, label: options.urls[i]!, source: manager}))
            ]} : {}),
            metrics: async () => ({contentType: metrics.registry.contentType, body: await metrics.registry.metrics()})
        });
    } catch (error) {
        await Promise.all(perServer.map(async (manager) => await manager.dispose()));
        await pipeline.dispose();
        io.stderr(`${serverStartFailure(error, "--port", "a free one")}\n`);
        return 1;
    }
    monitor.start();
    io.stdout(`Dashboard: ${dashboard.url}   Metrics: ${dashboard.baseUrl}metrics\nWatching ${options.urls.join(", ")} every ${options.intervalMs} ms. Ctrl-C stops.\n`);
    await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
    });
    io.stdout("Stopping…\n");
    await monitor.stop();
    await Promise.all(perServer.map(async (manager) => await manager.dispose()));
    await dashboard.close();
    await pipeline.dispose();
    return 0;
}

function describe(replica: TargetReplicaView): string {
    const what = [replica.kind, replica.model, replica.version].filter((part) => part !== null).join(" ");
    switch (replica.status) {
        case "up": return `${replica.name}: up (${what})`;
        case "connecting": return `${replica.name}: connecting`;
        default: return `${replica.name}: ${replica.status} since ${new Date(replica.since).toLocaleTimeString()} — ${replica.error ?? ""}`;
    }
}
