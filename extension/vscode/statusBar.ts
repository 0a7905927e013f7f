import * as vscode from "vscode";
import type {StatsDelta} from "../../protocol/statsView.js";
import {formatDuration, formatTokensPerS} from "../../common/format.js";
import type {ApiEndpoint} from "./apiEndpoint.js";
import type {EngineController} from "./engineController.js";

type Shown = {state: string, tokensPerS: number, running: number, msSinceLastStep: number};

/**
 * `$(pulse) 42.1 tok/s · 2 running` while an engine is up; stalled and crashed in the theme's
 * warning/error colours. Clicking opens the stats panel. Subscribes to StatsManager deltas at 2 Hz
 * only while an engine exists. The tooltip names the OpenAI-compatible endpoint while it serves.
 */
export class EngineStatusBar implements vscode.Disposable {
    private readonly item = vscode.window.createStatusBarItem("inferenceMonitor.status", vscode.StatusBarAlignment.Left, 50);
    private unsubscribe: (() => void) | undefined;
    private shown: Shown = {state: "stopped", tokensPerS: 0, running: 0, msSinceLastStep: 0};
    private readonly subscriptions: vscode.Disposable[];

    constructor(private readonly controller: EngineController, private readonly endpoint?: ApiEndpoint) {
        this.item.name = "Inference Monitor";
        this.item.command = "inferenceMonitor.showStats";
        this.subscriptions = [controller.onDidChange(() => this.follow())];
        if (endpoint !== undefined)
            this.subscriptions.push(endpoint.onDidChange(() => this.render()));
        this.follow();
    }

    dispose(): void {
        this.unsubscribe?.();
        for (const subscription of this.subscriptions)
            subscription.dispose();
        this.item.dispose();
    }

    private follow(): void {
        const active = this.controller.engine !== undefined;
        if (active && this.unsubscribe === undefined) {
            const snapshot = this.controller.stats.snapshot();
            this.shown = {state: snapshot.state, tokensPerS: snapshot.gauges.generationTokensPerS, running: snapshot.gauges.running,
                msSinceLastStep: snapshot.gauges.msSinceLastStep};
            this.unsubscribe = this.controller.stats.subscribe((delta) => this.apply(delta), {maxHz: 2});
        } else if (!active && this.unsubscribe !== undefined) {
            this.unsubscribe();
            this.unsubscribe = undefined;
        }
        if (!active)
            this.shown = {...this.shown, state: "stopped", running: 0, tokensPerS: 0};
        this.render();
    }

    private apply(delta: StatsDelta): void {
        const source = delta.reset;
        if (source !== undefined)
            this.shown = {state: source.state, tokensPerS: source.gauges.generationTokensPerS, running: source.gauges.running,
                msSinceLastStep: source.gauges.msSinceLastStep};
        if (delta.state !== undefined) this.shown.state = delta.state;
        if (delta.gauges?.generationTokensPerS !== undefined) this.shown.tokensPerS = delta.gauges.generationTokensPerS;
        if (delta.gauges?.running !== undefined) this.shown.running = delta.gauges.running;
        if (delta.gauges?.msSinceLastStep !== undefined) this.shown.msSinceLastStep = delta.gauges.msSinceLastStep;
        this.render();
    }

    private render(): void {
        const {state, tokensPerS, running, msSinceLastStep} = this.shown;
        const model = this.controller.modelLabel;
        if (state === "stopped" && model === undefined) {
            this.item.hide();
            return;
        }
        let text = `$(pulse) ${formatTokensPerS(tokensPerS)} · ${running} running`;
        let background: vscode.ThemeColor | undefined;
        if (state === "loading")
            text = "$(loading~spin) loading model…";
        else if (state === "stalled") {
            text = `$(warning) stalled ${formatDuration(msSinceLastStep)} · ${running} running`;
            background = new vscode.ThemeColor("statusBarItem.warningBackground");
        } else if (state === "crashed") {
            text = "$(error) engine crashed";
            background = new vscode.ThemeColor("statusBarItem.errorBackground");
        } else if (state === "stopped")
            text = "$(debug-stop) engine stopped";
        this.item.text = text;
        this.item.backgroundColor = background;
        const apiUrl = this.endpoint?.baseUrl;
        this.item.tooltip = `Inference Monitor: ${model ?? "no model"} — ${state}. Click to open the stats panel.` +
            (apiUrl !== undefined ? `\nOpenAI API: ${apiUrl}` : "");
        this.item.show();
    }
}
