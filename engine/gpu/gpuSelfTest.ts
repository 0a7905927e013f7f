/**
 * Chooses the GPU backend the engine loads, after a self-test of each candidate in its own process
 * (engine/gpu/gpuProbeMain.ts): a prebuilt backend can load and name the GPU yet abort the process at
 * its first evaluation — on an H200 with driver 580 (CUDA 13.0), node-llama-cpp 3.21.1's CUDA binary
 * (built with CUDA 13.1, no sm_90 code) stops with "the provided PTX was compiled with an unsupported
 * toolchain". Without this the engine crashed on every first request and the crash restarter gave up.
 * With "auto" a failing backend is skipped (the next one, else the CPU, is used, and the reason is
 * reported); a backend asked for by name that fails is an error that says why.
 */
import {fork} from "node:child_process";
import type {GpuChoice, GpuSetting} from "../../protocol/engineOptions.js";
import type {GpuFallback, GpuBackend} from "../../protocol/engineMessages.js";
import {gpuProbeRequestEnv, parseGpuProbeResult, type GpuProbeRequest, type ProbedBackend} from "../../protocol/gpuProbeMessages.js";
import {bundledEntryPath} from "../bundlePaths.js";
import {importNodeLlamaCpp} from "../llamaTypes.js";
import {ensureDemoModel} from "../model/demoModel.js";
import {errorMessage} from "../../common/errorMessage.js";
import {backendNames} from "../../common/gpuBackendText.js";

export type GpuOnlyBackend = Exclude<GpuBackend, "cpu">;
export type ProbeOutcome = {ok: true, devices: string[]} | {ok: false, reason: string};

const probeTimeoutMs = 120_000;
const outputKeepChars = 16_384;

/**
 * The backend to load for `setting`. `supported`: the GPU backends node-llama-cpp would try on this
 * machine, in its order (getLlamaGpuTypes("supported")); `probe` self-tests one.
 */
export async function chooseGpuBackend(setting: GpuSetting, supported: readonly GpuOnlyBackend[],
                                       probe: (backend: GpuOnlyBackend) => Promise<ProbeOutcome>): Promise<GpuChoice> {
    if (setting === "off")
        return {backend: "cpu", fallbacks: []};
    if (setting !== "auto") {
        if (!supported.includes(setting))
            throw new Error(noGpuBackendMessage(setting));
        const outcome = await probe(setting);
        if (!outcome.ok)
            throw new Error(`${backendNames[setting]} failed the engine's GPU self-test: ${outcome.reason}. ${settingAdvice}`);
        return {backend: setting, fallbacks: []};
    }
    const fallbacks: GpuFallback[] = [];
    for (const backend of supported) {
        const outcome = await probe(backend);
        if (outcome.ok)
            return {backend, fallbacks};
        fallbacks.push({backend, reason: outcome.reason});
    }
    return {backend: "cpu", fallbacks};
}

/**
 * The engine's choice for `setting`: node-llama-cpp's supported GPU backends here, each self-tested on
 * the tiny demo model; `tested`, an earlier engine's choice for the same setting, is taken as is.
 */
export async function chooseEngineGpu(setting: GpuSetting, cacheDir?: string, tested?: GpuChoice): Promise<GpuChoice> {
    if (tested !== undefined)
        return tested;
    const {getLlamaGpuTypes} = await importNodeLlamaCpp();
    const supported = (await getLlamaGpuTypes("supported")).filter((type) => type !== false);
    return await chooseGpuBackend(setting, supported, async (backend) =>
        probeBackend(backend, await ensureDemoModel({size: "tiny", ...(cacheDir !== undefined ? {cacheDir} : {})})));
}

const settingAdvice = "GPU setting \"auto\" uses whichever GPU backend works, \"off\" the CPU";

/** Why a backend asked for by name cannot be used on this machine at all. */
export function noGpuBackendMessage(gpu: GpuOnlyBackend): string {
    const name = backendNames[gpu];
    return `no ${name} backend works here: node-llama-cpp has no prebuilt ${name} binary for ${process.platform}-${process.arch}, ` +
        `or the ${name} driver and runtime libraries it needs are missing. ${settingAdvice}`;
}

/**
 * Self-tests `backend` in a forked process running `entryFile` (the bundled probe by default) on the
 * model at `modelPath`. Resolves, never rejects: a crash, a timeout or an error is a failed outcome
 * whose reason quotes the most telling line the process printed.
 */
export function probeBackend(backend: ProbedBackend, modelPath: string, entryFile = bundledEntryPath("gpuProbe.js"),
                             timeoutMs = probeTimeoutMs): Promise<ProbeOutcome> {
    const request: GpuProbeRequest = {backend, modelPath};
    return new Promise((resolve) => {
        let outcome: ProbeOutcome | undefined;
        let output = "";
        const child = fork(entryFile, [], {
            execPath: process.execPath, execArgv: [], stdio: ["ignore", "pipe", "pipe", "ipc"], serialization: "json",
            env: {...process.env, ELECTRON_RUN_AS_NODE: "1", [gpuProbeRequestEnv]: JSON.stringify(request)}
        });
        const timer = setTimeout(() => {
            outcome ??= {ok: false, reason: `the self-test did not finish within ${timeoutMs / 1000} s`};
            child.kill("SIGKILL");
        }, timeoutMs);
        // llama.cpp's own log lines may come on either stream; keep the end of both, in arrival order.
        for (const stream of [child.stdout, child.stderr]) {
            stream?.setEncoding("utf8");
            stream?.on("data", (chunk: string) => {
                output = (output + chunk).slice(-outputKeepChars);
            });
        }
        child.on("message", (message: unknown) => {
            try {
                const result = parseGpuProbeResult(message);
                outcome ??= result.type === "ok" ? {ok: true, devices: result.devices} : {ok: false, reason: result.message};
            } catch (error) {
                outcome ??= {ok: false, reason: `the self-test sent a bad message: ${errorMessage(error)}`};
            }
        });
        child.on("error", (error) => {
            outcome ??= {ok: false, reason: `the self-test could not start: ${errorMessage(error)}`};
        });
        child.on("exit", (code, signal) => {
            clearTimeout(timer);
            const ended = signal !== null ? `signal ${signal}` : `exit code ${code}`;
            resolve(outcome ?? {ok: false, reason: `${tellingLine(output) ?? "no output"} (the self-test process ended with ${ended})`});
        });
    });
}

/**
 * The line of a crashed probe's stderr that says what went wrong: ggml's own error text ("CUDA error:
 * the provided PTX …", "GGML_ASSERT(…) failed") before its "file.cu:108: CUDA error" abort line, and
 * build-machine paths cut to the file name.
 */
export function tellingLine(stderr: string): string | undefined {
    const lines = stderr.split("\n").map((line) => line.trim().replace(/^\/\S*\/([^/\s]+:\d+:)/, "$1")).filter((line) => line !== "");
    const line = lines.find((l) => /^(CUDA error: .+|.*GGML_ASSERT.*|ggml_vulkan: .*(error|failed).*|.*vk::\S+: Error.*)$/.test(l))
        ?? lines.find((l) => /error|failed|abort/i.test(l)) ?? lines.at(-1);
    return line === undefined ? undefined : line.slice(0, 300);
}
