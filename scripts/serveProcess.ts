/**
 * `inference-monitor serve` as a child process for the benchmarks that drive our OpenAI endpoint the
 * way a user runs it (bench:http, bench:peer): started on a free port, resolved once its model is ready.
 */
import {spawn, type ChildProcess} from "node:child_process";
import {bundledEntryPath} from "../engine/bundlePaths.js";

export type ServeProcess = {baseUrl: string, stop: () => Promise<void>};

/**
 * Spawns `serve --model MODEL --port 0 ...args` and resolves with its printed base URL once it is
 * `Ready:`. `onSpawn` sees the child at once (to kill it if this process exits while it loads).
 */
export async function startServe(modelPath: string, args: readonly string[],
                                 onSpawn?: (child: ChildProcess) => void): Promise<ServeProcess> {
    const child = spawn(process.execPath, [bundledEntryPath("cli.js"), "serve", "--model", modelPath, "--port", "0", ...args],
        {stdio: ["ignore", "pipe", "pipe"]});
    onSpawn?.(child);
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const baseUrl = await new Promise<string>((resolve, reject) => {
        let stdout = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
            stdout += chunk;
            const url = /OpenAI-compatible API: (http:\S+\/v1)/.exec(stdout)?.[1];
            if (url !== undefined && stdout.includes("Ready:"))
                resolve(url);
        });
        void exited.then((code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
    });
    return {baseUrl, stop: async () => {
        child.kill("SIGINT");
        await exited;
    }};
}
