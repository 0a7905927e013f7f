/**
 * The backend node-llama-cpp picks on this machine for `gpu: "auto"` with prebuilt binaries, as the
 * engine asks for it: tests compare the engine's report with this instead of assuming a CPU-only host.
 * Asked once, in a child process (synchronously, so a suite can decide to skip when it is declared).
 */
import {spawnSync} from "node:child_process";
import {gpuBackends, type GpuBackend} from "../../protocol/engineMessages.js";

const detectScript = `
import("node-llama-cpp").then(async ({getLlama, LlamaLogLevel}) => {
    const llama = await getLlama({gpu: "auto", build: "never", logLevel: LlamaLogLevel.error, progressLogs: false});
    process.stdout.write(llama.gpu === false ? "cpu" : llama.gpu);
});`;

let detected: GpuBackend | undefined;

export function expectedBackend(): GpuBackend {
    if (detected === undefined) {
        const result = spawnSync(process.execPath, ["-e", detectScript], {encoding: "utf8", timeout: 120_000});
        const backend = gpuBackends.find((name) => name === result.stdout.trim());
        if (backend === undefined)
            throw new Error(`could not ask node-llama-cpp for its backend: ${result.stdout}${result.stderr}`);
        detected = backend;
    }
    return detected;
}

/** How the panel header names a backend (written out here, not imported from the page under test). */
export const backendHeaderNames: Record<GpuBackend, string> = {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"};
