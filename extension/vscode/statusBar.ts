import * as vscode from "vscode";
import type {ActivePeriodView, StatsDelta, StatsSnapshotView} from "../../protocol/statsView.js";
import {formatClock, formatCount, formatDuration, formatTokensPerS} from "../../common/format.js";
import type {ApiEndpoint} from "./apiEndpoint.js";
import type {EngineController} from "./engineController.js";
import type {ServerWatch} from "./serverWatch.js";

type Shown = {state: string, tokensPerS: number, running: number, msSinceLastStep: number, lastActive: ActivePeriodView | null};

const shownOf = (view: StatsSnapshotView): Shown => ({
    state: view.state, tokensPerS: view.gauges.generationTokensPerS, running: view.gauges.running,
    msSinceLastStep: view.gauges.msSinceLastStep, lastActive: view.lastActive
});

/**
 * `$(pulse) 42.1 tok/s · 2 running` while an engine is up; idle after some work, the last active
 * period's rate instead, dimmed (a whole item can only be dimmed, in the theme's disabled colour):
 * `$(pulse) last active 312.0 tok/s · 0 running`, its times in the tooltip; stalled and crashed in the theme's
 * warning/error colours. Clicking opens the stats panel. Subscribes to StatsManager deltas at 2 Hz
 * only while an engine exists. The tooltip names the OpenAI and Ollama endpoints while they serve.
 * While the panel shows watched servers ("Show Stats For…"), it shows those: `$(server) … · llama.cpp`.
 */
export class EngineStatusBar implements vscode.Disposable {
    private readonly item = vscode.window.createStatusBarItem("inferenceMonitor.status", vscode.StatusBarAlignment.Left, 50);
    private unsubscribe: (() => void) | undefined;
    private shown: Shown = {state: "stopped", tokensPerS: 0, running: 0, msSinceLastStep: 0, lastActive: null};
    private readonly subscriptions: vscode.Disposable[];
    /** The source subscribed to (the engine's manager or a watched server's), to notice a switch. */
    private following: object | undefined;

    constructor(private readonly controller: EngineController, private readonly endpoint?: ApiEndpoint,
        private readonly servers?: ServerWatch) {
        this.item.name = "Inference Monitor";
        this.item.command = "inferenceMonitor.showStats";
        this.subscriptions = [controller.onDidChange(() => this.follow())];
        if (endpoint !== undefined)
            this.subscriptions.push(endpoint.onDidChange(() => this.render()));
        if (servers !== undefined)
            this.subscriptions.push(servers.onDidChange(() => this.follow()));
        this.follow();
    }

    dispose(): void {
        this.unsubscribe?.();
        for (const subscription of this.subscriptions)
            subscription.dispose();
        this.item.dispose();
    }

    private follow(): void {
        const server = this.servers?.selected;
        const stats = server?.manager ?? this.controller.stats;
        const active = server !== undefined || this.controller.engine !== undefined;
        if (this.unsubscribe !== undefined && (!active || this.following !== stats)) {
            this.unsubscribe();
            this.unsubscribe = undefined;
        }
        if (active && this.unsubscribe === undefined) {
            this.shown = shownOf(stats.snapshot());
            this.following = stats;
            this.unsubscribe = stats.subscribe((delta) => this.apply(delta), {maxHz: 2});
        }
        if (!active)
            this.shown = {...this.shown, state: "stopped", running: 0, tokensPerS: 0};
        this.render();
    }

    private apply(delta: StatsDelta): void {
        if (delta.reset !== undefined)
            this.shown = shownOf(delta.reset);
        if (delta.state !== undefined) this.shown.state = delta.state;
        if (delta.gauges?.generationTokensPerS !== undefined) this.shown.tokensPerS = delta.gauges.generationTokensPerS;
        if (delta.gauges?.running !== undefined) this.shown.running = delta.gauges.running;
        if (delta.gauges?.msSinceLastStep !== undefined) this.shown.msSinceLastStep = delta.gauges.msSinceLastStep;
        if (delta.lastActive !== undefined) this.shown.lastActive = delta.lastActive;
        this.render();
    }

    private render(): void {
        const {state, tokensPerS, running, msSinceLastStep, lastActive} = this.shown;
        const server = this.servers?.selected;
        if (server !== undefined) {
            this.item.text = state === "crashed" ? `$(error) ${server.label}: unreachable`
                : state === "loading" ? `$(loading~spin) ${server.label}: connecting…`
                    : `$(server) ${formatTokensPerS(tokensPerS)} · ${running} running · ${server.label}`;
            this.item.backgroundColor = state === "crashed" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
            this.item.color = undefined;
            this.item.tooltip = `Inference Monitor: watching ${server.label} — ${state}. Click to open the stats panel; ` +
                "Show Stats For… switches back to the local engine.";
            this.item.show();
            return;
        }
        const model = this.controller.modelLabel;
        if (state === "stopped" && model === undefined) {
            this.item.hide();
            return;
        }
        let text = `$(pulse) ${formatTokensPerS(tokensPerS)} · ${running} running`;
        let background: vscode.ThemeColor | undefined;
        const idleAfterWork = state === "idle" && lastActive !== null;
        if (idleAfterWork)
            text = `$(pulse) last active ${formatTokensPerS(lastActive.generationTokensPerS)} · ${running} running`;
        else if (state === "loading")
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
        this.item.color = idleAfterWork ? new vscode.ThemeColor("disabledForeground") : undefined;
        const apiUrl = this.endpoint?.baseUrl;
        this.item.tooltip = `Inference Monitor: ${model ?? "no model"} — ${state}. Click to open the stats panel.` +
            (idleAfterWork ? `\n${describePeriod(lastActive)}` : "") +
            (apiUrl !== undefined ? `\nOpenAI API: ${apiUrl}\nOllama API: ${apiUrl.replace(/\/v1$/, "")}` : "");
        this.item.show();
    }
}

/** "Last active 12:03:01–12:03:04 (2.8 s): 312.0 tok/s generated on average, 4 requests finished." */
function describePeriod(period: ActivePeriodView): string {
    return `Last active ${formatClock(period.startedAt)}–${formatClock(period.endedAt)} (${formatDuration(period.endedAt - period.startedAt)}): ` +
        `${formatTokensPerS(period.generationTokensPerS)} generated on average, ${formatCount(period.requests, "request")} finished.`;
}
