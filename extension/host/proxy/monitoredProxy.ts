/**
 * The monitoring proxy as the CLI's `proxy` and VS Code's Start Monitoring Proxy… both run it: what is
 * behind the upstream identified once (kind, model), its requests fed to `manager`, and the upstream's
 * reachability kept in the manager's target view.
 */
import type {StatsManager} from "../stats/statsManager.js";
import {probeTarget} from "../targets/probeTarget.js";
import {readModelId} from "../targets/targetHttp.js";
import {MonitoringProxy} from "./monitoringProxy.js";
import {ProxyStats} from "./proxyStats.js";
import {ProxyTargetView} from "./proxyTargetView.js";

export type MonitoredProxyOptions = {
    upstream: string,
    port: number,
    manager: StatsManager,
    /** A request could not reach the upstream (it got a 502). */
    onUnreachable?: (error: string) => void
};

const probeTimeoutMs = 3000;

/** Starts the proxy; rejects as MonitoringProxy.listen does (PortInUseError for a taken port). */
export async function startMonitoredProxy(options: MonitoredProxyOptions): Promise<{proxy: MonitoringProxy, target: ProxyTargetView}> {
    const {upstream, manager} = options;
    const target = new ProxyTargetView(upstream);
    // Once: a server that is down now may come up later, and the proxy forwards whatever it is.
    target.kind = await probeTarget(upstream, {timeoutMs: probeTimeoutMs}).catch(() => "openai" as const);
    target.model = await readModelId(upstream, {timeoutMs: probeTimeoutMs}) ?? null;
    manager.onEngineState("ready");
    manager.onTarget(target.view());
    const proxy = await MonitoringProxy.listen({
        upstream, port: options.port, stats: new ProxyStats(manager),
        onUpstream: (reachable, error) => {
            target.reached(reachable, error);
            manager.onTarget(target.view());
            if (!reachable)
                options.onUnreachable?.(error ?? "unreachable");
        }
    });
    return {proxy, target};
}
