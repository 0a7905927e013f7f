/** How GPU backends and the self-test's fallbacks read to a user: one wording for the CLI, VS Code and the engine's errors. */
import type {GpuBackend, GpuFallback} from "../protocol/engineMessages.js";

export const backendNames: Record<GpuBackend, string> = {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"};

/** One line telling the user a GPU backend was skipped, and why. */
export function describeGpuFallback(fallback: GpuFallback, usedBackend: GpuBackend): string {
    return `${backendNames[fallback.backend]} failed the engine's GPU self-test (${fallback.reason}); running on ${backendNames[usedBackend]} instead`;
}
