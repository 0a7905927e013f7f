/** Engine flags that more than one command takes (`bench`, `serve`, `demo`), declared once: the declaration and its reading. */
import type {CliOption} from "./commandLine.js";
import {defaultEngineOptions, gpuSettings, type GpuSetting} from "../protocol/engineOptions.js";
import {choiceValue} from "./optionValues.js";

/** `--prefix-cache on|off`: EngineOptions.prefixCache (protocol/engineOptions.ts). */
export const prefixCacheFlag = {
    type: "string", placeholder: "on|off",
    description: "prefix caching: a request reuses the KV cache of a finished one whose prompt starts the same (default on)"
} as const satisfies CliOption;

/** EngineOptions.prefixCache from `--prefix-cache`; throws UsageError for anything but on/off. */
export function prefixCacheValue(raw: string | undefined): boolean {
    return choiceValue("prefix-cache", raw, ["on", "off"], "on") === "on";
}

/** `--gpu auto|cuda|vulkan|metal|off`: EngineOptions.gpu (the VS Code setting `inferenceMonitor.gpu`). */
export const gpuFlag = {
    type: "string", placeholder: gpuSettings.join("|"),
    description: "GPU backend from node-llama-cpp's prebuilt binaries (default auto: CUDA, Vulkan or Metal when present, else CPU)"
} as const satisfies CliOption;

/** EngineOptions.gpu from `--gpu`; throws UsageError for anything else. */
export function gpuValue(raw: string | undefined): GpuSetting {
    return choiceValue("gpu", raw, gpuSettings, defaultEngineOptions.gpu);
}
