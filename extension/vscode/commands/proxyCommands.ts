/**
 * "Start Monitoring Proxy…" / "Stop Monitoring Proxy": the CLI's `proxy` inside VS Code. The proxy
 * listens on 127.0.0.1:`inferenceMonitor.proxy.port` in front of the server picked; its requests feed
 * a StatsManager that the panel and the status bar show (a source of ServerWatch) while it runs.
 */
import * as vscode from "vscode";
import {startMonitoredProxy} from "../../host/proxy/monitoredProxy.js";
import type {MonitoringProxy} from "../../host/proxy/monitoringProxy.js";
import type {ProxyTargetView} from "../../host/proxy/proxyTargetView.js";
import {PortInUseError} from "../../host/net/listen.js";
import {StatsManager} from "../../host/stats/statsManager.js";
import type {ServerWatch} from "../serverWatch.js";
import {readSettings} from "../settings.js";
import {pickServerUrl} from "./serverCommands.js";

const proxyKeyPrefix = "proxy:";

export async function startProxy(watch: ServerWatch, log: vscode.LogOutputChannel): Promise<boolean> {
    const upstream = await pickServerUrl("Inference Monitor: Start Monitoring Proxy (pick the server it forwards to)");
    if (upstream === undefined)
        return false;
    for (const key of watch.extraKeys.filter((k) => k.startsWith(proxyKeyPrefix)))
        await watch.removeExtra(key); // one proxy at a time: it owns the port
    const port = readSettings().proxyPort;
    const manager = new StatsManager();
    let proxy: MonitoringProxy;
    let target: ProxyTargetView;
    try {
        ({proxy, target} = await startMonitoredProxy({
            upstream, port, manager, onUnreachable: (error) => log.warn(`monitoring proxy: ${upstream} could not be reached: ${error}`)
        }));
    } catch (error) {
        await manager.dispose();
        if (error instanceof PortInUseError)
            throw new Error(`port ${port} is already in use, so the monitoring proxy cannot start. Set inferenceMonitor.proxy.port to a free port.`,
                {cause: error});
        throw error;
    }
    await watch.addExtra({key: `${proxyKeyPrefix}${upstream}`, label: `Proxy → ${upstream}`, manager}, async () => {
        await proxy.close();
        await manager.dispose();
        log.info(`Monitoring proxy stopped (${proxy.url})`);
    });
    log.info(`Monitoring proxy: ${proxy.url}/v1 → ${upstream} (${target.kind})`);
    void vscode.window.showInformationMessage(`Inference Monitor: monitoring proxy at ${proxy.url}/v1 → ${upstream}. Point your tools there.`,
        "Copy URL").then(async (action) => {
        if (action === "Copy URL")
            await vscode.env.clipboard.writeText(`${proxy.url}/v1`);
    });
    return true;
}

export async function stopProxy(watch: ServerWatch): Promise<void> {
    const keys = watch.extraKeys.filter((key) => key.startsWith(proxyKeyPrefix));
    if (keys.length === 0) {
        void vscode.window.showInformationMessage("Inference Monitor: no monitoring proxy is running.");
        return;
    }
    for (const key of keys)
        await watch.removeExtra(key);
    void vscode.window.showInformationMessage("Inference Monitor: monitoring proxy stopped.");
}
