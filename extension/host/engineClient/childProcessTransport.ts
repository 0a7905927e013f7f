import {fork, type ChildProcess} from "node:child_process";
import {bundledEntryPath} from "../../../engine/bundlePaths.js";
import type {EngineOptions} from "../../../protocol/engineOptions.js";
import {engineOptionsEnv, serializeEngineOptions} from "../../../protocol/engineOptionsTransfer.js";
import type {HostToEngine} from "../../../protocol/engineMessages.js";
import {statsSecretEnv, statsUrlEnv} from "../../../protocol/statsChannel.js";
import type {EngineExit, EngineTransport} from "./engineTransport.js";

const stderrKeepChars = 4000;

/**
 * Runs the engine in its own process: `fork` with this process's own executable and
 * ELECTRON_RUN_AS_NODE=1, so it works from VS Code's Electron extension host too. Options and the
 * stats secret travel in the environment, never in argv.
 */
export class ChildProcessTransport implements EngineTransport {
    readonly mode = "process";
    private readonly child: ChildProcess;
    private stderrTail = "";
    private exited: EngineExit | undefined;
    private readonly exitHandlers: Array<(exit: EngineExit) => void> = [];

    constructor(options: EngineOptions, entryFile = bundledEntryPath("engineMain.js")) {
        const env: NodeJS.ProcessEnv = {...process.env, ELECTRON_RUN_AS_NODE: "1", [engineOptionsEnv]: serializeEngineOptions(options)};
        delete env[statsUrlEnv];
        delete env[statsSecretEnv];
        if (options.statsChannel !== undefined) {
            env[statsUrlEnv] = options.statsChannel.url;
            env[statsSecretEnv] = options.statsChannel.secret;
        }
        this.child = fork(entryFile, [], {
            execPath: process.execPath,
            execArgv: [],
            env,
            stdio: ["ignore", "ignore", "pipe", "ipc"],
            serialization: "json"
        });
        this.child.stderr?.setEncoding("utf8");
        this.child.stderr?.on("data", (chunk: string) => {
            this.stderrTail = (this.stderrTail + chunk).slice(-stderrKeepChars);
        });
        this.child.on("exit", (code, signal) => {
            const description = signal !== null ? `signal ${signal}` : `exit code ${code}`;
            this.exited = {code, signal, description};
            for (const handler of this.exitHandlers)
                handler(this.exited);
        });
        this.child.on("error", () => {
            // spawn failures also produce "exit"; nothing else to do here
        });
    }

    get pid(): number {
        return this.child.pid ?? -1;
    }

    onMessage(handler: (message: unknown, validated: boolean) => void): void {
        this.child.on("message", (message) => handler(message, false));
    }

    onExit(handler: (exit: EngineExit) => void): void {
        this.exitHandlers.push(handler);
        if (this.exited !== undefined)
            handler(this.exited);
    }

    send(message: HostToEngine): void {
        if (this.child.connected)
            this.child.send(message);
    }

    async shutdown(graceMs: number): Promise<void> {
        if (this.exited !== undefined)
            return;
        const gone = new Promise<void>((resolve) => this.onExit(() => resolve()));
        this.send({type: "shutdown"});
        const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
        await gone;
        clearTimeout(timer);
    }

    recentStderr(): string {
        return this.stderrTail.trim();
    }
}
