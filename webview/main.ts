/**
 * The stats panel's entry point (bundled to dist/webview/panel.js): reads the page's config, builds
 * the panel and connects it to the host — VS Code's webview messaging, or the dashboard's WebSocket.
 */
import {loadChartJs} from "./charts/chartSetup.js";
import {PanelApp} from "./panelApp.js";
import {panelConfigElementId, parsePanelConfig, type PanelConfig} from "../protocol/panelConfig.js";
import {storeLimits} from "./store.js";
import {createTransport} from "./transport.js";
import {errorMessage} from "../common/errorMessage.js";

/** For tests and debugging: `window.__inferenceMonitorPanel`. */
export type PanelDebugHandle = {
    app: PanelApp,
    storeLimits: typeof storeLimits,
    /** Feeds a raw message to the panel as if the host had sent it. */
    receive(raw: unknown): void
};

declare global {
    interface Window {
        __inferenceMonitorPanel?: PanelDebugHandle
    }
}

function readConfig(): PanelConfig {
    const element = document.getElementById(panelConfigElementId);
    return parsePanelConfig(JSON.parse(element?.textContent ?? "null") as unknown);
}

async function start(): Promise<void> {
    const root = document.getElementById("app") ?? document.body;
    let config: PanelConfig;
    try {
        config = readConfig();
    } catch (error) {
        root.textContent = `Inference Monitor: bad page config (${errorMessage(error)})`;
        return;
    }
    const app = new PanelApp(root, await loadChartJs());
    const transport = createTransport(config.transport, {
        open: () => app.onOpen(),
        message: (raw) => app.receive(raw),
        status: (status) => app.onStatus(status)
    });
    app.connect((message) => transport.send(message));
    window.__inferenceMonitorPanel = {app, storeLimits, receive: (raw) => app.receive(raw)};
}

void start();
