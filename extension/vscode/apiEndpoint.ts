import * as vscode from "vscode";
import {errorMessage} from "../../common/errorMessage.js";
import {existingDirectory} from "../../common/existingDirectory.js";
import {PortInUseError} from "../host/net/listen.js";
import {ApiServer} from "../host/openai/apiServer.js";
import type {EngineController} from "./engineController.js";
import {configSection, readSettings} from "./settings.js";

/** Where the API key lives: SecretStorage, never settings.json. */
const apiKeySecret = "inferenceMonitor.apiKey";
/** Context key for the `when` clause of "Copy API Endpoint". */
const servingContextKey = "inferenceMonitor.apiServing";

/**
 * The OpenAI-compatible endpoint in VS Code: one ApiServer on 127.0.0.1:`server.port` while a model
 * is meant to run (`EngineController.modelActive`) and `server.enabled` is on. It serves whichever
 * EngineClient the controller runs now, so it outlives engine restarts and crashes (answering 503
 * meanwhile); `/metrics` comes from the stats pipeline; no dashboard (the panel is the UI here).
 * Settings and the key are followed live; a busy port gets one error notification, not another port.
 */
export class ApiEndpoint implements vscode.Disposable {
    private server: ApiServer | undefined;
    /** Port and key the running server was started with. */
    private servedWith: string | undefined;
    /** Port and key of the last attempt that failed: not retried until they change or the model stops. */
    private failedWith: string | undefined;
    private key: string | undefined;
    private keyLoaded = false;
    private disposed = false;
    private queue: Promise<void> = Promise.resolve();
    private readonly changeEmitter = new vscode.EventEmitter<void>();
    /** Fires when the endpoint starts or stops serving. */
    readonly onDidChange = this.changeEmitter.event;
    private readonly disposables: vscode.Disposable[] = [];

    constructor(
        private readonly context: vscode.ExtensionContext,
        private readonly controller: EngineController,
        private readonly log: vscode.LogOutputChannel
    ) {
        this.disposables.push(
            controller.onDidChange(() => void this.sync()),
            vscode.workspace.onDidChangeConfiguration((event) => {
                if (event.affectsConfiguration(`${configSection}.server`))
                    void this.sync();
            }),
            context.secrets.onDidChange((event) => {
                if (event.key === apiKeySecret) {
                    this.keyLoaded = false;
                    void this.sync();
                }
            })
        );
        void this.sync();
    }

    /** The base URL tools use (`http://127.0.0.1:PORT/v1`) while serving. */
    get baseUrl(): string | undefined {
        return this.server?.baseUrl;
    }

    /** Whether an API key is set (requests then need `Authorization: Bearer KEY`). */
    async hasApiKey(): Promise<boolean> {
        return (await this.apiKey()) !== undefined;
    }

    async apiKey(): Promise<string | undefined> {
        const key = await this.context.secrets.get(apiKeySecret);
        return key === undefined || key === "" ? undefined : key;
    }

    /** Stores the key (empty removes it) and restarts the server with it; resolves once that is done. */
    async setApiKey(key: string): Promise<void> {
        if (key === "")
            await this.context.secrets.delete(apiKeySecret);
        else
            await this.context.secrets.store(apiKeySecret, key);
        this.keyLoaded = false;
        await this.sync();
    }

    /** Why nothing is served now, for a command that needs the endpoint. */
    whyNotServing(): string {
        const settings = readSettings();
        if (!settings.serverEnabled)
            return `the OpenAI-compatible API is turned off (setting ${configSection}.server.enabled).`;
        if (!this.controller.modelActive)
            return "the OpenAI-compatible API serves while a model runs: start a model first.";
        if (this.failedWith !== undefined)
            return `the OpenAI-compatible API could not start on port ${settings.serverPort} (setting ${configSection}.server.port); see the Inference Monitor output.`;
        return "the OpenAI-compatible API is starting.";
    }

    /** Brings the server in line with the settings, the key and the engine; serialized. Resolves when applied. */
    sync(): Promise<void> {
        this.queue = this.queue.then(() => this.apply()).catch((error: unknown) => this.log.error(`API endpoint: ${errorMessage(error)}`));
        return this.queue;
    }

    private async apply(): Promise<void> {
        const settings = readSettings();
        const wanted = !this.disposed && settings.serverEnabled && this.controller.modelActive;
        if (wanted && !this.keyLoaded) {
            this.key = await this.apiKey();
            this.keyLoaded = true;
        }
        const config = JSON.stringify([settings.serverPort, this.key ?? null, settings.serverSlotSavePath]);
        if (this.server !== undefined && (!wanted || this.servedWith !== config)) {
            const server = this.server;
            this.server = undefined;
            this.servedWith = undefined;
            await server.close();
            this.log.info(`OpenAI-compatible API stopped (${server.baseUrl})`);
            await this.changed();
        }
        if (!wanted) {
            this.failedWith = undefined; // the next start tries again
            return;
        }
        if (this.server !== undefined || this.failedWith === config)
            return;
        const port = settings.serverPort;
        const slotSavePath = this.slotSavePath(settings.serverSlotSavePath);
        try {
            this.server = await ApiServer.listen({
                engine: {current: () => this.controller.engine},
                port,
                host: "127.0.0.1",
                apiKeys: this.key !== undefined ? [{key: this.key}] : [],
                metrics: await this.controller.mountMetrics(),
                onRejected: (reason) => this.log.warn(`OpenAI-compatible API refused a request: ${reason}`),
                onIgnoredField: (message) => this.log.warn(`OpenAI-compatible API: ${message}`),
                ...(slotSavePath !== undefined ? {slotSavePath} : {})
            });
        } catch (error) {
            this.failedWith = config;
            this.reportFailure(error, port);
            return;
        }
        this.servedWith = config;
        this.failedWith = undefined;
        this.log.info(`OpenAI-compatible API: ${this.server.baseUrl}${this.key !== undefined ? " (API key required)" : ""}, ` +
            `Prometheus metrics at ${this.server.url}metrics`);
        await this.changed();
    }

    /** The slot actions' directory from its setting: an existing directory, or none (said in the log). */
    private slotSavePath(setting: string): string | undefined {
        if (setting === "")
            return undefined;
        const directory = existingDirectory(setting);
        if (directory !== undefined)
            return directory;
        this.log.warn(`${configSection}.server.slotSavePath is not an existing directory (${setting}): slot actions answer 501`);
        return undefined;
    }

    private reportFailure(error: unknown, port: number): void {
        const setting = `${configSection}.server.port`;
        const message = error instanceof PortInUseError
            ? `port ${port} is already in use, so the OpenAI-compatible API is not served. Set ${setting} to a free port ` +
              `(or turn off ${configSection}.server.enabled).`
            : `the OpenAI-compatible API could not start on port ${port}: ${errorMessage(error)}`;
        this.log.error(message);
        void vscode.window.showErrorMessage(`Inference Monitor: ${message}`, "Open Settings").then((action) => {
            if (action === "Open Settings")
                void vscode.commands.executeCommand("workbench.action.openSettings", setting);
        });
    }

    private async changed(): Promise<void> {
        this.changeEmitter.fire();
        await vscode.commands.executeCommand("setContext", servingContextKey, this.server !== undefined);
    }

    async dispose(): Promise<void> {
        this.disposed = true;
        for (const disposable of this.disposables)
            disposable.dispose();
        await this.sync();
        this.changeEmitter.dispose();
    }
}
