/** Runs the built command line (dist/cli.js) as a user would, in a child process. */
import {spawn, type ChildProcess} from "node:child_process";
import net from "node:net";
import {bundledEntryPath} from "../../engine/bundlePaths.js";
import {testCacheDir} from "./testModels.js";

export type CliRun = {code: number | null, stdout: string, stderr: string};

export type CliRunOptions = {
    /** Called with everything printed so far on each stdout chunk, with the child (to signal it). */
    onStdout?: (text: string, child: ChildProcess) => void,
    timeoutMs?: number
};

export function runCli(args: string[], options: CliRunOptions = {}): Promise<CliRun> {
    return new Promise((resolve) => {
        const child = spawn(process.execPath, [bundledEntryPath("cli.js"), ...args], {
            env: {...process.env, INFERENCE_MONITOR_CACHE_DIR: testCacheDir}, stdio: ["ignore", "pipe", "pipe"]
        });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
            stdout += chunk;
            options.onStdout?.(stdout, child);
        });
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
            stderr += chunk;
        });
        const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 180_000);
        child.on("exit", (code) => {
            clearTimeout(timer);
            resolve({code, stdout, stderr});
        });
    });
}

/**
 * An `onStdout` for a command that prints `Metrics: http://…/metrics` once it serves (watch, proxy):
 * runs `then` once, with that URL and the child (to signal it when done).
 */
export function onceMetricsUrl(then: (url: string, child: ChildProcess) => Promise<void>): NonNullable<CliRunOptions["onStdout"]> {
    let started = false;
    return (text, child) => {
        const url = /Metrics: (http:\S+\/metrics)/.exec(text)?.[1];
        if (url === undefined || started)
            return;
        started = true;
        void then(url, child);
    };
}

/** A port something else is listening on. */
export async function busyPort(): Promise<{port: number, close: () => void}> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {port: (server.address() as net.AddressInfo).port, close: () => server.close()};
}
