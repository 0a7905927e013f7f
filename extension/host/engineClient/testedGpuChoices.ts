/**
 * The GPU self-test's outcome (engine/gpu/gpuSelfTest.ts), remembered per `gpu` setting for the life of
 * this host process: the next engine started with the same setting loads that backend at once instead
 * of testing again (1–4 s per start on a GPU machine: a model switch, a settings change, a restart).
 * Forgotten when an engine crashes, so a GPU that went bad is tested again before the next start.
 */
import type {GpuChoice, GpuSetting} from "../../../protocol/engineOptions.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";

const remembered = new Map<GpuSetting, GpuChoice>();

export function testedGpuChoice(setting: GpuSetting): GpuChoice | undefined {
    const choice = remembered.get(setting);
    return choice === undefined ? undefined : {backend: choice.backend, fallbacks: choice.fallbacks.map((f) => ({...f}))};
}

export function rememberGpuChoice(setting: GpuSetting, info: EngineInfo): void {
    remembered.set(setting, {backend: info.backend, fallbacks: info.gpuFallbacks.map((f) => ({...f}))});
}

export function forgetGpuChoice(setting: GpuSetting): void {
    remembered.delete(setting);
}
