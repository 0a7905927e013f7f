/**
 * VS Code entry point: registers the commands, the status bar item, the log channel and the stats
 * panel (with its serializer, so it survives a window reload). The engine starts only on demand and
 * stops on deactivate.
 */
import path from "node:path";
import * as vscode from "vscode";
import {ApiEndpoint} from "./apiEndpoint.js";
import {copyApiEndpoint, setApiKey} from "./commands/apiEndpointCommands.js";
import {exportStats} from "./commands/exportStats.js";
import {runBenchmark} from "./commands/runBenchmark.js";
import {startProxy, stopProxy} from "./commands/proxyCommands.js";
import {attachServer, detachServers, showStatsFor} from "./commands/serverCommands.js";
import {sendPrompt} from "./commands/sendPrompt.js";
import {EngineController} from "./engineController.js";
import {pickModel, type ModelChoice} from "./modelPicker.js";
import {ServerWatch} from "./serverWatch.js";
import {chatVendor, LocalChatModelProvider} from "./chatModelProvider.js";
import {readSettings} from "./settings.js";
import {StatsPanelManager} from "./statsPanel.js";
import {EngineStatusBar} from "./statusBar.js";
import {errorMessage} from "../../common/errorMessage.js";

let controller: EngineController | undefined;
let apiEndpoint: ApiEndpoint | undefined;

export function activate(context: vscode.ExtensionContext): void {
    const log = vscode.window.createOutputChannel("Inference Monitor", {log: true});
    const engine = new EngineController(context, log);
    controller = engine;
    const endpoint = new ApiEndpoint(context, engine, log);
    apiEndpoint = endpoint;
    const chatModels = new LocalChatModelProvider(engine, log);
    context.subscriptions.push(chatModels, vscode.lm.registerLanguageModelChatProvider(chatVendor, chatModels));
    const servers = new ServerWatch(context, log);
    const panels = new StatsPanelManager(context, engine, log, servers);
    context.subscriptions.push(log, servers, new EngineStatusBar(engine, endpoint, servers), panels);
    const updateServersContext = () => void vscode.commands.executeCommand("setContext", "inferenceMonitor.hasServers", servers.sources.length > 0);
    context.subscriptions.push(servers.onDidChange(updateServersContext));
    updateServersContext();

    const command = (id: string, run: () => unknown) =>
        context.subscriptions.push(vscode.commands.registerCommand(id, async () => {
            try {
                return await run();
            } catch (error) {
                const message = errorMessage(error);
                log.error(`${id} failed: ${message}`);
                void vscode.window.showErrorMessage(`Inference Monitor: ${message}`);
            }
        }));

    command("inferenceMonitor.startModel", async () => {
        const configured = readSettings().modelPath;
        const choice: ModelChoice | undefined = configured !== ""
            ? {path: configured, label: path.basename(configured)}
            : await pickModel(context, log);
        if (choice !== undefined && await engine.start(choice))
            panels.reveal(true);
    });
    command("inferenceMonitor.stopModel", () => engine.stop());
    command("inferenceMonitor.restartEngine", () => engine.restart());
    command("inferenceMonitor.showStats", () => panels.reveal(false));
    command("inferenceMonitor.sendPrompt", () => sendPrompt(engine, log));
    command("inferenceMonitor.runBenchmark", () => runBenchmark(engine, log));
    command("inferenceMonitor.exportStats", () => exportStats(engine, log));
    command("inferenceMonitor.copyApiEndpoint", () => copyApiEndpoint(endpoint));
    command("inferenceMonitor.setApiKey", () => setApiKey(endpoint));
    command("inferenceMonitor.attachServer", async () => {
        const attached = await attachServer(servers, log);
        if (attached)
            panels.reveal(true);
        return attached;
    });
    command("inferenceMonitor.detachServer", () => detachServers(servers));
    command("inferenceMonitor.startProxy", async () => {
        if (await startProxy(servers, log))
            panels.reveal(true);
    });
    command("inferenceMonitor.stopProxy", () => stopProxy(servers));
    command("inferenceMonitor.showStatsFor", async () => {
        if (await showStatsFor(servers))
            panels.reveal(true);
    });
}

export async function deactivate(): Promise<void> {
    await apiEndpoint?.dispose();
    apiEndpoint = undefined;
    await controller?.dispose();
    controller = undefined;
}
