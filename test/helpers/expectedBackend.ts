/**
 * The backend the engine will run on here for `gpu: "auto"`, chosen the way the engine chooses it
 * (engine/gpu/gpuSelfTest.ts: node-llama-cpp's supported GPU backends, each self-tested), so tests
 * compare the engine's report with the machine instead of assuming a CPU-only host. Asked once, in a
 * child process (synchronously, so a suite can decide to skip when it is declared).
 */
import {spawnSync} from "node:child_process";
import path from "node:path";
import {gpuBackends, type GpuBackend, type GpuFallback} from "../../protocol/engineMessages.js";

let detected: {backend: GpuBackend, fallbacks: GpuFallback[]} | undefined;

export function expectedGpuChoice(): {backend: GpuBackend, fallbacks: GpuFallback[]} {
    if (detected === undefined) {
        const selfTest = path.join(__dirname, "..", "..", "engine", "gpu", "gpuSelfTest.ts");
        const script = `require(${JSON.stringify(selfTest)}).chooseEngineGpu("auto").then((choice) => process.stdout.write(JSON.stringify(choice)));`;
        const result = spawnSync(process.execPath, ["--import", "tsx", "-e", script], {encoding: "utf8", timeout: 300_000});
        let choice: {backend: GpuBackend, fallbacks: GpuFallback[]} | undefined;
        try {
            choice = JSON.parse(result.stdout) as typeof choice;
        } catch {
            choice = undefined;
        }
        if (choice === undefined || !gpuBackends.includes(choice.backend))
            throw new Error(`could not ask the engine's GPU self-test for its backend: ${result.stdout}${result.stderr}`);
        detected = choice;
    }
    return detected;
}

export function expectedBackend(): GpuBackend {
    return expectedGpuChoice().backend;
}

/** How the panel header names a backend (written out here, not imported from the page under test). */
export const backendHeaderNames: Record<GpuBackend, string> = {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"};
