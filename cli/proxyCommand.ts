import path from "node:path";
import {DashboardServer} from "../extension/host/dashboard/dashboardServer.js";
import {startMonitoredProxy} from "../extension/host/proxy/monitoredProxy.js";
import type {MonitoringProxy} from "../extension/host/proxy/monitoringProxy.js";
import type {ProxyTargetView} from "../extension/host/proxy/proxyTargetView.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {proxyCommandLine, proxyOptionsFrom} from "./proxyArgs.js";
import {serverStartFailure} from "./serverStartFailure.js";

/**
 * `inference-monitor proxy --upstream URL`: forwards `/v1/*` and `/api/*` to the upstream unchanged and
 * measures every generation request; the dashboard and our `/metrics` on the monitor port, until Ctrl-C.
 */
export async function proxyCommand(args: string[], io: CliIo): Promise<number> {
    const commandLine = readCommandLine(proxyCommandLine, args, io, (values) => proxyOptionsFrom(values));
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    const pipeline = await StatsPipeline.create({writeLogLine: (line) => io.stderr(`${line}\n`), logIntervalS: options.logIntervalS});
    let proxy: MonitoringProxy | undefined;
    let target: ProxyTargetView;
    let dashboard: DashboardServer | undefined;
    try {
        ({proxy, target} = await startMonitoredProxy({upstream: options.upstream, port: options.port, manager: pipeline.manager}));
        dashboard = await DashboardServer.listen({
            port: options.monitorPort, source: pipeline.manager, webviewDir: path.join(__dirname, "webview"), title: "Inference Monitor · proxy",
            metrics: await pipeline.mountMetrics(target.model !== null ? {modelName: target.model} : {})
        });
    } catch (error) {
        await proxy?.close();
        await pipeline.dispose();
        io.stderr(`${serverStartFailure(error, proxy === undefined ? "--port" : "--monitor-port", "a free one")}\n`);
        return 1;
    }
    io.stdout(`Proxy: ${proxy.url}/v1 → ${options.upstream} (${target.kind}${target.model !== null ? `, ${target.model}` : ""})\n` +
        `Dashboard: ${dashboard.url}   Metrics: ${dashboard.baseUrl}metrics\nPoint your tools at ${proxy.url}/v1. Ctrl-C stops.\n`);
    await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
    });
    io.stdout("Stopping…\n");
    await proxy.close();
    await dashboard.close();
    await pipeline.dispose();
    return 0;
}
