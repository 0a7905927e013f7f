import * as vscode from "vscode";
import {CrashRestarter, type CrashRestartEvent} from "../host/engineClient/crashRestarter.js";
import {EngineClient} from "../host/engineClient/engineClient.js";
import type {EngineInfo} from "../../protocol/engineMessages.js";
import type {MetricsBody} from "../host/stats/loggers/metricsHttpServer.js";
import {StatsPipeline} from "../host/stats/statsPipeline.js";
import type {StatsManager} from "../host/stats/statsManager.js";
import {rememberModel, type ModelChoice} from "./modelPicker.js";
import {engineClientOptions, readSettings, type MonitorSettings} from "./settings.js";
import {errorMessage} from "../../common/errorMessage.js";
import {formatCount, formatDuration, formatParams, formatPrefixCache, formatPromptCache} from "../../common/format.js";
import {describeGpuFallback} from "../../common/gpuBackendText.js";

/** Context keys the `when` clauses of package.json use. */
const contextKeys = {
    running: "inferenceMonitor.engineRunning",
    started: "inferenceMonitor.engineStarted",
    hasStats: "inferenceMonitor.hasStats"
} as const;

/**
 * Owns the engine for the window: starts it from the settings and a model choice, restarts and stops
 * it, and keeps one StatsPipeline (StatsManager + loggers) across restarts so counts and the
 * request ledger survive a crash.
 */
export class EngineController implements vscode.Disposable {
    private client: EngineClient | undefined;
    private lastChoice: ModelChoice | undefined;
    private readyAt: number | undefined;
    /** From a start until an explicit stop or a failed start: restarts and crashes keep it (the API endpoint follows it). */
    private active = false;
    private readonly pipeline: StatsPipeline;
    private readonly changeEmitter = new vscode.EventEmitter<void>();
    /** Fires when the engine starts, stops, crashes or its info changes. */
    readonly onDidChange = this.changeEmitter.event;
    private readonly disposables: vscode.Disposable[] = [];
    /** Restarts a crashed engine with a growing delay; gives up, with one notification, after a few crashes. */
    private readonly restarter = new CrashRestarter({
        restart: async () => {
            if (this.lastChoice === undefined || !await this.launch(this.lastChoice, true))
                throw new Error(this.lastStartError ?? "the engine did not start");
        },
        onEvent: (event) => void this.onRestartEvent(event)
    });
    /** Why the last start failed, for the restarter's report. */
    private lastStartError: string | undefined;
    /** How the current engine last exited (exit code or signal), for the crash report. */
    private lastExit = "";

    constructor(private readonly context: vscode.ExtensionContext, private readonly log: vscode.LogOutputChannel) {
        const settings = readSettings();
        this.pipeline = new StatsPipeline({
            stallThresholdMs: settings.stallThresholdMs,
            logIntervalS: settings.logIntervalS,
            prometheusPort: settings.prometheusPort,
            writeLogLine: (line) => log.info(line),
            onError: (error) => log.warn(`stats: ${errorMessage(error)}`)
        });
        this.disposables.push(vscode.workspace.onDidChangeConfiguration((event) => {
            if (event.affectsConfiguration("inferenceMonitor"))
                void this.applySettings(event);
        }));
        void this.pipeline.applyLiveSettings(settings).catch((error: unknown) => this.reportPipelineError(error));
    }

    get stats(): StatsManager {
        return this.pipeline.manager;
    }

    get engine(): EngineClient | undefined {
        return this.client;
    }

    get info(): EngineInfo | undefined {
        return this.client?.state === "ready" ? this.client.info : undefined;
    }

    /** When the current engine became ready (epoch ms), for the panel's uptime. */
    get engineReadyAt(): number | undefined {
        return this.client?.state === "ready" ? this.readyAt : undefined;
    }

    get modelLabel(): string | undefined {
        return this.lastChoice?.label;
    }

    /**
     * Whether a model is meant to run: true from "Start Model" (loading included) through crashes and
     * restarts, false after "Stop Model", a cancelled load or a failed start.
     */
    get modelActive(): boolean {
        return this.active;
    }

    /** Renders the stats' Prometheus exposition, for a server that serves `/metrics` itself (the API endpoint). */
    async mountMetrics(): Promise<() => Promise<MetricsBody>> {
        return await this.pipeline.mountMetrics();
    }

    /** Starts the engine on `choice`, replacing a running one. Shows progress; errors become notifications. */
    async start(choice: ModelChoice): Promise<boolean> {
        this.restarter.reset();
        return await this.launch(choice, false);
    }

    /**
     * Starts an engine on `choice`. `automatic`: a restart after a crash — its failure goes to the
     * restarter (which reports once when it gives up), not to a notification of its own. A start
     * superseded by a stop or another start ends quietly.
     */
    private async launch(choice: ModelChoice, automatic: boolean): Promise<boolean> {
        this.active = true;
        this.lastStartError = undefined;
        await this.stopClient();
        const settings = readSettings();
        this.lastChoice = choice;
        const cacheDir = this.context.globalStorageUri.fsPath;
        const client = new EngineClient(engineClientOptions(settings, choice.path, cacheDir));
        this.client = client;
        this.pipeline.attach(client);
        client.observe({
            onLog: (level, message) => this.log[level](`engine: ${message}`),
            onRejected: (rejected) => this.log.warn(`rejected ${rejected.source} message: ${rejected.reason}`),
            onEngineExit: (exit) => this.lastExit = exit.description,
            onEngineState: (state) => {
                void this.updateContextKeys();
                this.changeEmitter.fire();
                if (state === "crashed" && this.client === client)
                    this.restarter.crashed(`the engine exited (${this.lastExit})`);
            }
        });
        this.log.info(`Starting ${choice.label} (${describeSettings(settings)})`);
        this.changeEmitter.fire();
        try {
            const info = await vscode.window.withProgress({
                location: vscode.ProgressLocation.Notification,
                title: `Inference Monitor: loading ${choice.label}`,
                cancellable: true
            }, async (progress, token) => {
                token.onCancellationRequested(() => void this.stop());
                let reported = 0;
                client.observe({onLoading: (fraction) => {
                    const percent = Math.round(fraction * 100);
                    if (percent > reported) {
                        progress.report({increment: percent - reported, message: `${percent}%`});
                        reported = percent;
                    }
                }});
                return await client.start();
            });
            this.log.info(`Engine ready: ${info.model.name} ` +
                `(${info.model.architecture}, ${formatParams(info.model.parameterCount)} params, ${info.model.quantization}) ` +
                `on ${info.backend.toUpperCase()}${info.gpuDevices.length > 0 ? ` (${info.gpuDevices.join(", ")})` : ""}, ` +
                `context ${info.contextSize}, ${formatCount(info.parallel, "sequence")}, ${formatCount(info.threads, "thread")}, ` +
                `prefix cache ${formatPrefixCache(info)}, prefill chunk ${info.prefillChunkTokens} tokens, loaded in ${formatDuration(info.loadMs)}, ` +
                `${this.client === client ? client.mode : ""} mode`);
            this.readyAt = Date.now();
            for (const fallback of info.gpuFallbacks) {
                const text = describeGpuFallback(fallback, info.backend);
                this.log.warn(text);
                void vscode.window.showWarningMessage(`Inference Monitor: ${text}.`);
            }
            if (choice.path !== undefined)
                await rememberModel(this.context.globalState, choice.path);
            await this.updateContextKeys();
            this.changeEmitter.fire();
            return true;
        } catch (error) {
            const message = errorMessage(error);
            if (this.client !== client) {
                // Stopped while loading, or another start replaced this one: nothing failed.
                this.log.info(`Start of ${choice.label} ended before the model loaded: ${firstLine(message)}`);
                return false;
            }
            this.client = undefined;
            this.active = automatic;
            await this.updateContextKeys();
            this.changeEmitter.fire();
            this.log.error(`Could not start ${choice.label}: ${message}`);
            if (automatic) {
                this.lastStartError = firstLine(message);
                return false;
            }
            const action = await vscode.window.showErrorMessage(`Inference Monitor: could not start ${choice.label}: ${firstLine(message)}`, "Show Log");
            if (action === "Show Log")
                this.log.show(true);
            return false;
        }
    }

    async restart(): Promise<boolean> {
        if (this.lastChoice === undefined)
            return false;
        return await this.start(this.lastChoice);
    }

    async stop(): Promise<void> {
        this.restarter.reset();
        const wasActive = this.active;
        this.active = false;
        await this.stopClient();
        if (wasActive)
            this.changeEmitter.fire();
    }

    /** Stops the engine process (or in-process engine) only; `start` uses it to replace a running one. */
    private async stopClient(): Promise<void> {
        const client = this.client;
        if (client === undefined)
            return;
        this.client = undefined;
        await client.stop();
        this.pipeline.detach(client);
        this.log.info("Engine stopped");
        await this.updateContextKeys();
        this.changeEmitter.fire();
    }

    async dispose(): Promise<void> {
        await this.stop();
        this.restarter.dispose();
        await this.pipeline.dispose();
        for (const disposable of this.disposables)
            disposable.dispose();
        this.changeEmitter.dispose();
    }

    private async onRestartEvent(event: CrashRestartEvent): Promise<void> {
        if (event.kind === "scheduled") {
            this.log.warn(`${event.crash}; requests in flight were ended as failed. Restarting in ${formatDuration(event.delayMs)} ` +
                `(automatic restart ${event.attempt} of ${event.maxRestarts}).`);
            return;
        }
        if (event.kind === "restarted") {
            this.log.info(`Engine restarted after a crash (automatic restart ${event.attempt}).`);
            return;
        }
        this.active = false;
        this.changeEmitter.fire();
        const summary = `the engine crashed ${event.crashes} times within ${formatDuration(event.windowMs)}, so it is not restarted again. ` +
            `Last: ${event.crash}.`;
        this.log.error(summary);
        const action = await vscode.window.showErrorMessage(`Inference Monitor: ${summary}`, "Show Log", "Restart Engine");
        if (action === "Restart Engine")
            await this.restart();
        else if (action === "Show Log")
            this.log.show(true);
    }

    private async applySettings(event: vscode.ConfigurationChangeEvent): Promise<void> {
        const settings = readSettings();
        try {
            await this.pipeline.applyLiveSettings(settings);
        } catch (error) {
            this.reportPipelineError(error);
        }
        const needsRestart = ["modelPath", "gpu", "contextSize", "parallelSequences", "threads", "prefillChunkTokens", "prefixCache", "promptCacheMiB",
            "tilePadding", "engineMode", "statsIntervalMs", "loraAdapters"]
            .some((key) => event.affectsConfiguration(`inferenceMonitor.${key}`));
        if (needsRestart && this.client !== undefined) {
            const loading = this.client.state === "loading";
            const action = await vscode.window.showInformationMessage(loading
                ? "Inference Monitor: the model is loading with the previous settings; restart the engine to apply the new ones."
                : "Inference Monitor: restart the engine to apply the new settings.", "Restart Engine");
            if (action === "Restart Engine")
                await this.restart();
        }
    }

    private reportPipelineError(error: unknown): void {
        const message = errorMessage(error);
        this.log.error(message);
        void vscode.window.showErrorMessage(`Inference Monitor: ${message}`);
    }

    private async updateContextKeys(): Promise<void> {
        const state = this.client?.state;
        await vscode.commands.executeCommand("setContext", contextKeys.running, state === "ready");
        await vscode.commands.executeCommand("setContext", contextKeys.started, this.lastChoice !== undefined);
        await vscode.commands.executeCommand("setContext", contextKeys.hasStats, this.lastChoice !== undefined);
    }
}

function describeSettings(settings: MonitorSettings): string {
    return `${settings.engineMode} mode, gpu ${settings.gpu}, context ${settings.contextSize}, ${settings.parallelSequences} sequences, ` +
        `threads ${settings.threads === 0 ? "default" : settings.threads}, ` +
        `prefill chunk ${settings.prefillChunkTokens === 0 ? "default" : settings.prefillChunkTokens}, ` +
        `prefix cache ${settings.prefixCache ? "on" : "off"}, prompt cache ${formatPromptCache(settings.promptCacheMiB)}, ` +
        `tile padding ${settings.tilePadding ? "on" : "off"}, stats every ${settings.statsIntervalMs} ms`;
}

function firstLine(text: string): string {
    return text.split("\n")[0] ?? text;
}
