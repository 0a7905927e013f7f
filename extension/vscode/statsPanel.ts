import * as vscode from "vscode";
import {makeNonce, renderPanelHtml} from "../host/panel/panelHtml.js";
import {encodeMessage, type ExportFormat, type ExportResultParams} from "../../protocol/panelMessages.js";
import {PanelSession} from "../host/panel/panelSession.js";
import type {PanelStatsSource} from "../host/panel/panelSession.js";
import type {EngineController} from "./engineController.js";
import type {ServerWatch} from "./serverWatch.js";
import {saveStatsExport} from "./saveExport.js";

export const statsViewType = "inferenceMonitor.stats";

/** The panel's source key of the local engine (watched servers' keys are their URLs and "merged"). */
const engineKey = "engine";

/**
 * The "Inference Stats" webview panel: one at a time, restored after a window reload by its
 * serializer. The page is the bundled panel (strict CSP, nonce script, resources only from
 * dist/webview). It talks only through webview/protocol.ts; while hidden it gets no messages (its
 * context is not retained, and on showing again it announces `ready` and gets a fresh snapshot).
 */
export class StatsPanelManager implements vscode.Disposable {
    private panel: vscode.WebviewPanel | undefined;
    private readonly disposables: vscode.Disposable[] = [];
    private readonly webviewRoot: vscode.Uri;

    private session: PanelSession | undefined;
    /** What the panel shows: the server(s) chosen with "Show Stats For…", else the local engine. */
    private readonly source: PanelStatsSource = {
        snapshot: () => this.currentStats().snapshot(),
        subscribe: (listener, options) => this.currentStats().subscribe(listener, options),
        reset: () => this.currentStats().reset()
    };

    constructor(context: vscode.ExtensionContext, private readonly controller: EngineController,
        private readonly log: vscode.LogOutputChannel, private readonly servers?: ServerWatch) {
        this.webviewRoot = vscode.Uri.joinPath(context.extensionUri, "dist", "webview");
        if (servers !== undefined)
            this.disposables.push(servers.onDidChange(() => this.session?.resync()));
        this.disposables.push(vscode.window.registerWebviewPanelSerializer(statsViewType, {
            deserializeWebviewPanel: (panel) => {
                this.adopt(panel);
                return Promise.resolve();
            }
        }));
    }

    reveal(preserveFocus: boolean): void {
        if (this.panel !== undefined) {
            this.panel.reveal(undefined, preserveFocus);
            return;
        }
        const panel = vscode.window.createWebviewPanel(statsViewType, "Inference Stats",
            {viewColumn: vscode.ViewColumn.Beside, preserveFocus}, this.webviewOptions());
        this.adopt(panel);
    }

    dispose(): void {
        this.panel?.dispose();
        for (const disposable of this.disposables)
            disposable.dispose();
    }

    private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
        return {enableScripts: true, localResourceRoots: [this.webviewRoot], retainContextWhenHidden: false};
    }

    private adopt(panel: vscode.WebviewPanel): void {
        this.panel?.dispose();
        this.panel = panel;
        panel.webview.options = this.webviewOptions();
        const servers = this.servers;
        const session = new PanelSession({
            source: this.source,
            ...(servers !== undefined ? {choices: {
                list: () => [{key: engineKey, label: `Local engine${this.controller.modelLabel !== undefined ? ` (${this.controller.modelLabel})` : ""}`},
                    ...servers.sources.map(({key, label}) => ({key, label}))],
                selected: () => servers.selected?.key ?? engineKey,
                select: (key: string) => servers.select(key === engineKey ? undefined : key)
            }} : {}),
            send: (message) => void panel.webview.postMessage(JSON.parse(encodeMessage(message)) as unknown),
            exportStats: (format) => this.exportToFile(format),
            engineStartedAt: () => this.engineStartedAt(),
            onRejected: (reason) => this.log.warn(`stats panel: dropped a message: ${reason}`)
        });
        this.session = session;
        const webview = panel.webview;
        webview.html = renderPanelHtml({
            scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(this.webviewRoot, "panel.js")).toString(),
            styleUri: webview.asWebviewUri(vscode.Uri.joinPath(this.webviewRoot, "panel.css")).toString(),
            cspSource: webview.cspSource,
            nonce: makeNonce(),
            transport: {kind: "vscode"},
            title: "Inference Stats"
        });
        const subscriptions = [
            webview.onDidReceiveMessage((message: unknown) => session.receive(message)),
            panel.onDidChangeViewState(() => {
                if (!panel.visible)
                    session.stopDeltas();
            })
        ];
        panel.onDidDispose(() => {
            session.dispose();
            for (const subscription of subscriptions)
                subscription.dispose();
            if (this.panel === panel) {
                this.panel = undefined;
                this.session = undefined;
            }
        });
    }

    private currentStats(): PanelStatsSource {
        return this.servers?.selected?.manager ?? this.controller.stats;
    }

    private engineStartedAt(): number | undefined {
        return this.servers?.selected !== undefined ? undefined : this.controller.engineReadyAt;
    }

    /** Saves through the same dialog as "Export Stats…"; a cancelled or failed save answers the panel with an error notice. */
    private async exportToFile(format: ExportFormat): Promise<ExportResultParams> {
        const outcome = await saveStatsExport(this.source.snapshot(), format, this.log);
        if (outcome.kind === "cancelled")
            throw new Error("cancelled");
        if (outcome.kind === "failed")
            throw new Error(outcome.message);
        return outcome.result;
    }
}
