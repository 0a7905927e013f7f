/**
 * llama.cpp's own `llama-server`, built by `.ci/build-llama-server.sh` from the llama.cpp source
 * node-llama-cpp ships, as a child process for benchmarks (scripts/benchPeer.ts) and tests: started on a
 * free loopback port, ready once GET /health answers 200, killed on stop and when this process exits.
 */
import {execFile, spawn, spawnSync, type ChildProcess} from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

const repoRoot = path.resolve(__dirname, "..");
const buildScript = path.join(repoRoot, ".ci", "build-llama-server.sh");
/** Keep this much of llama-server's stderr for error messages. */
const stderrTailChars = 8000;

/**
 * Where the build script puts the binary (its cache key is the hash of node-llama-cpp's llama.cpp
 * bundle), without building: lets a test tell "not built" from "built" without starting a 20-minute build.
 */
export function expectedLlamaServerPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
    const bundle = path.join(repoRoot, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");
    if (!fs.existsSync(bundle))
        return undefined;
    const key = crypto.createHash("sha256").update(fs.readFileSync(bundle)).digest("hex").slice(0, 16);
    const cache = env.LLAMA_SERVER_CACHE ?? path.join(os.homedir(), ".cache", "inference-monitor-llama-server");
    return path.join(cache, key, "build", "bin", "llama-server");
}

/** Runs `.ci/build-llama-server.sh` (idempotent: instant when cached, ~20 min on 2 cores otherwise); resolves to the binary's path. */
export async function buildLlamaServer(): Promise<string> {
    return await new Promise((resolve, reject) => {
        execFile("bash", [buildScript], {cwd: repoRoot, maxBuffer: 64 << 20}, (error, stdout, stderr) => {
            const binary = stdout.trim().split("\n").at(-1) ?? "";
            if (error !== null || binary === "" || !fs.existsSync(binary))
                reject(new Error(`bash .ci/build-llama-server.sh failed (${error?.message ?? `printed ${JSON.stringify(binary)}`}):\n` +
                    stderr.slice(-stderrTailChars)));
            else
                resolve(binary);
        });
    });
}

/** What `llama-server --version` prints (to stderr) after `version:`, e.g. `0.4.0-dev (build 1, commit 80fb11a)`. */
export function llamaServerVersion(binary: string): string {
    const run = spawnSync(binary, ["--version"], {encoding: "utf8"});
    return `${run.stdout}${run.stderr}`.split("\n").find((line) => line.startsWith("version:"))?.slice("version:".length).trim() ?? "unknown";
}

/** A TCP port free on 127.0.0.1 right now (llama-server takes no port 0). */
export async function freeLoopbackPort(): Promise<number> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", resolve);
    });
    const {port} = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return port;
}

/**
 * llama-server's flags for serving the way our engine is benchmarked against it: `threads` for generation and prompts,
 * `parallel` slots of `contextPerSequence` cells each (not one unified cache), continuous batching, flash attention as
 * llama.cpp decides, no web UI. Each benchmark appends its own (`--metrics`, `--min-p 0`, `--cache-ram`, …).
 */
export function servingArgs(shape: {threads: number, parallel: number, contextPerSequence: number}): string[] {
    return ["-t", String(shape.threads), "-tb", String(shape.threads), "-np", String(shape.parallel),
        "-c", String(shape.contextPerSequence * shape.parallel), "--no-kv-unified", "--cont-batching", "-fa", "auto", "--no-webui"];
}

export type LlamaServerOptions = {
    binary: string,
    model: string,
    /** Everything after `-m MODEL --host 127.0.0.1 --port P` (threads, slots, context, sampling defaults, …). */
    args: readonly string[],
    /** How long loading may take before it is an error. Default 60 s. */
    readyTimeoutMs?: number,
    /** Listen on this port (e.g. to restart a server where it was). Default: a free one. */
    port?: number
};

export type LlamaServer = {
    /** `http://127.0.0.1:PORT/v1`. */
    baseUrl: string,
    origin: string,
    /** The full command line, for reports. */
    commandLine: string[],
    stop: () => Promise<void>
};

const running = new Set<ChildProcess>();
let exitHooked = false;

/** Kills `child` (a server this process started) if it is still running when this process exits or is interrupted. */
export function killOnExit(child: ChildProcess): void {
    hookExit();
    running.add(child);
    child.once("exit", () => running.delete(child));
}

function hookExit(): void {
    if (exitHooked)
        return;
    exitHooked = true;
    process.on("exit", () => {
        for (const child of running)
            child.kill("SIGKILL");
    });
    for (const signal of ["SIGINT", "SIGTERM"] as const)
        process.once(signal, () => {
            for (const child of running)
                child.kill("SIGKILL");
            process.exit(signal === "SIGINT" ? 130 : 143);
        });
}

/** Starts llama-server on a free loopback port; resolves once GET /health is 200 and it said it listens on 127.0.0.1. */
export async function startLlamaServer(options: LlamaServerOptions): Promise<LlamaServer> {
    const port = options.port ?? await freeLoopbackPort();
    const commandLine = [options.binary, "-m", options.model, "--host", "127.0.0.1", "--port", String(port), ...options.args];
    const child = spawn(commandLine[0]!, commandLine.slice(1), {stdio: ["ignore", "ignore", "pipe"]});
    killOnExit(child);
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
        stderr = (stderr + chunk).slice(-4 * stderrTailChars);
    });
    let exitCode: number | string | null | undefined;
    const exited = new Promise<void>((resolve) => child.on("exit", (code, signal) => {
        exitCode = code ?? signal;
        resolve();
    }));
    child.on("error", (error) => {
        stderr += `\nspawn failed: ${error.message}`;
        exitCode = "spawn error";
    });
    const origin = `http://127.0.0.1:${port}`;
    const stop = async () => {
        if (exitCode === undefined) {
            child.kill("SIGTERM");
            const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
            await exited;
            clearTimeout(timer);
        }
    };
    const fail = async (why: string): Promise<never> => {
        await stop();
        throw new Error(`llama-server ${why}\ncommand: ${commandLine.join(" ")}\nstderr (tail):\n${stderr.slice(-stderrTailChars)}`);
    };
    const deadline = performance.now() + (options.readyTimeoutMs ?? 60_000);
    for (;;) {
        if (exitCode !== undefined)
            return await fail(`exited (${exitCode}) before it was healthy`);
        if (performance.now() > deadline)
            return await fail(`was not healthy on ${origin}/health within ${(options.readyTimeoutMs ?? 60_000) / 1000} s`);
        const status = await fetch(`${origin}/health`, {signal: AbortSignal.timeout(2000)}).then((r) => r.status, () => 0);
        if (status === 200)
            break;
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // It answered on 127.0.0.1; also check it bound nothing wider (its log names the address it listens on).
    const listening = /listening on (http:\/\/\S+)/.exec(stderr)?.[1];
    if (listening !== undefined && !listening.startsWith("http://127.0.0.1:"))
        return await fail(`listens on ${listening}, not on loopback only`);
    return {baseUrl: `${origin}/v1`, origin, commandLine, stop};
}

/** A counter from llama-server's /metrics (needs `--metrics`), e.g. `llamacpp:tokens_predicted_total`. */
export async function llamaServerCounter(origin: string, name: string): Promise<number> {
    const text = await (await fetch(`${origin}/metrics`)).text();
    const match = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} (\\S+)$`, "m").exec(text);
    if (match === null)
        throw new Error(`no ${name} in llama-server's /metrics`);
    return Number(match[1]);
}
