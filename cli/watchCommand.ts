import path from "node:path";
import {DashboardServer} from "../extension/host/dashboard/dashboardServer.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {TargetMonitor} from "../extension/host/targets/targetMonitor.js";
import type {TargetReplicaView} from "../protocol/targetView.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {serverStartFailure} from "./serverStartFailure.js";
import {watchCommandLine, watchOptionsFrom} from "./watchArgs.js";

/**
 * `inference-monitor watch URL…`: polls running servers and serves the live dashboard and our
 * `/metrics` (vLLM names) for them on one port, until Ctrl-C. Prints each server's state when it changes.
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
    const printed = new Map<string, string>();
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
        }
    });
    await monitor.pollOnce(); // the first round names the model for /metrics
    let dashboard: DashboardServer;
    try {
        const model = monitor.view().replicas.find((replica) => replica.model !== null)?.model ?? undefined;
        dashboard = await DashboardServer.listen({
            port: options.port, source: pipeline.manager, webviewDir: path.join(__dirname, "webview"),
            title: "Inference Monitor · watch", metrics: await pipeline.mountMetrics(model !== undefined ? {modelName: model} : {})
        });
    } catch (error) {
        await pipeline.dispose();
        io.stderr(`${serverStartFailure(error, "--port", "a free one")}\n`);
        return 1;
    }
    monitor.start();
    io.stdout(`Dashboard: ${dashboard.url}   Metrics: ${dashboard.url}metrics\nWatching ${options.urls.join(", ")} every ${options.intervalMs} ms. Ctrl-C stops.\n`);
    await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
    });
    io.stdout("Stopping…\n");
    await monitor.stop();
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
