import {fork, type ChildProcess} from "node:child_process";
import {bundledEntryPath} from "../../../engine/bundlePaths.js";
import type {EngineOptions} from "../../../protocol/engineOptions.js";
import {engineOptionsEnv, serializeEngineOptions} from "../../../protocol/engineOptionsTransfer.js";
import {maxBatchMessages, type HostToEngine, type HostToEngineFrame} from "../../../protocol/engineMessages.js";
import {statsSecretEnv, statsUrlEnv} from "../../../protocol/statsChannel.js";
import {engineExecArgv} from "./engineExecArgv.js";
import type {EngineExit, EngineTransport} from "./engineTransport.js";
import {TurnBatcher} from "./turnBatcher.js";

const stderrKeepChars = 4000;

/**
 * libuv threads in the engine process, unless the environment already sets UV_THREADPOOL_SIZE.
 * node-llama-cpp runs each decode and each sequence's sampling as an async native task on this pool,
 * and a step's tasks wait on each other anyway (the samples need the decode's logits, the next decode
 * needs every sample). With Node's 4
 * threads the samples run at once and the decode lands on a different thread each step; with one, the
 * decode stays on a warm thread and the samples run back to back. Measured here (2 vCPUs, demo `small`,
 * 1 llama thread, `node --import tsx scripts/benchThreadpool.ts --repeats 7 --sizes 1,2,4`), output
 * tok/s with 1 / 2 / 4 threads: 463 / 400 / 373 at 1 concurrent request, 759 / 727 / 747 at 4, 703 /
 * 675 / 675 at 8. GPU backends were not measured. With one thread the engine also queues each sample right
 * behind its decode (engine/sampleAhead.ts), which is only safe where tasks run one at a time.
 */
export const engineThreadpoolSize = 1;

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
    private readonly outgoing = new TurnBatcher<HostToEngine>((messages) => this.write(messages), maxBatchMessages);

    constructor(options: EngineOptions, entryFile = bundledEntryPath("engineMain.js")) {
        const env: NodeJS.ProcessEnv = {
            UV_THREADPOOL_SIZE: String(engineThreadpoolSize),
            ...process.env,
            ELECTRON_RUN_AS_NODE: "1",
            [engineOptionsEnv]: serializeEngineOptions(options)
        };
        delete env[statsUrlEnv];
        delete env[statsSecretEnv];
        if (options.statsChannel !== undefined) {
            env[statsUrlEnv] = options.statsChannel.url;
            env[statsSecretEnv] = options.statsChannel.secret;
        }
        this.child = fork(entryFile, [], {
            execPath: process.execPath,
            execArgv: engineExecArgv(options.threads),
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

    /** One event-loop turn's messages go as one frame: the engine then admits requests sent together together. */
    send(message: HostToEngine): void {
        this.outgoing.push(message);
    }

    private write(messages: HostToEngine[]): void {
        if (!this.child.connected)
            return;
        const frame: HostToEngineFrame = messages.length === 1 ? messages[0]! : {type: "batch", messages};
        this.child.send(frame);
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
