/** Engine flags that more than one command takes (`bench`, `serve`, `demo`), declared once: the declaration and its reading. */
import type {CliOption} from "./commandLine.js";
import {defaultEngineOptions, defaultPromptCacheMiB, gpuSettings, maxPrefillChunkTokens, maxPromptCacheMiB, type GpuSetting} from "../protocol/engineOptions.js";
import {choiceValue, integerValue} from "./optionValues.js";
import {UsageError} from "./commandLine.js";
import {isLoraScale, maxLoraAdapters, maxLoraScale, type LoraAdapter} from "../protocol/loraAdapters.js";

/** `--prefix-cache on|off`: EngineOptions.prefixCache (protocol/engineOptions.ts). */
export const prefixCacheFlag = {
    type: "string", placeholder: "on|off",
    description: "prefix caching: a request reuses the KV cache of a finished one whose prompt starts the same (default on)"
} as const satisfies CliOption;

/** EngineOptions.prefixCache from `--prefix-cache`; throws UsageError for anything but on/off. */
export function prefixCacheValue(raw: string | undefined): boolean {
    return choiceValue("prefix-cache", raw, ["on", "off"], "on") === "on";
}

/** `--tile-padding on|off`: EngineOptions.tilePadding. */
export const tilePaddingFlag = {
    type: "string", placeholder: "on|off",
    description: "on the CPU, a short rest of a prompt deep in a cached prefix goes with cached tokens evaluated again, where the model's " +
        "shape says llama.cpp's attention is then faster in tiles (default on)"
} as const satisfies CliOption;

/** EngineOptions.tilePadding from `--tile-padding`; throws UsageError for anything but on/off. */
export function tilePaddingValue(raw: string | undefined): boolean {
    return choiceValue("tile-padding", raw, ["on", "off"], "on") === "on";
}

/** `--prompt-cache MIB`: EngineOptions.promptCacheMiB (the VS Code setting `inferenceMonitor.promptCacheMiB`). */
export const promptCacheFlag = {
    type: "string", placeholder: "MIB",
    description: "prompt cache, like llama-server's --cache-ram: a sequence's KV state is saved (to a temporary file) before a request " +
        `replaces its tokens, and restored for a later prompt that starts the same; MIB caps it, 0 = off (default ${defaultPromptCacheMiB}; needs --prefix-cache on)`
} as const satisfies CliOption;

/** EngineOptions.promptCacheMiB from `--prompt-cache` (undefined: the default); throws UsageError for a bad value. */
export function promptCacheValue(raw: string | undefined): number | undefined {
    return raw === undefined ? undefined : integerValue("prompt-cache", raw, defaultPromptCacheMiB, 0, maxPromptCacheMiB);
}

/** `--prefill-chunk N`: EngineOptions.prefillChunkTokens (the VS Code setting `inferenceMonitor.prefillChunkTokens`). */
export const prefillChunkFlag = {
    type: "string", placeholder: "N",
    description: "chunked prefill: prompt tokens evaluated per step while other requests decode, like vLLM's --max-num-batched-tokens " +
        "(default 128 on the CPU, 512 on a GPU; larger: lower TTFT, higher ITL of the others while a prompt goes in)"
} as const satisfies CliOption;

/** EngineOptions.prefillChunkTokens from `--prefill-chunk` (undefined: the backend's default); throws UsageError for a bad value. */
export function prefillChunkValue(raw: string | undefined): number | undefined {
    return raw === undefined ? undefined : integerValue("prefill-chunk", raw, 0, 1, maxPrefillChunkTokens);
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

/** `--lora FILE[,FILE…]`: EngineOptions.loraAdapters at scale 1, as llama-server's flag. */
export const loraFlag = {
    type: "string", placeholder: "FILE[,FILE…]",
    description: "LoRA adapters (GGUF) applied at scale 1, as llama-server's --lora, to every request that names no scales of its own " +
        "(its `lora`); GET /lora-adapters lists them"
} as const satisfies CliOption;

/** `--lora-scaled FILE:SCALE[,…]`: EngineOptions.loraAdapters with their scales, as llama-server's flag. */
export const loraScaledFlag = {
    type: "string", placeholder: "FILE:SCALE[,…]",
    description: "LoRA adapters with their scales, as llama-server's --lora-scaled (after any --lora ones)"
} as const satisfies CliOption;

/**
 * `--lora-init-without-apply`: the adapters load at scale 0, for `POST /lora-adapters` or a request's `lora` to set (llama-server's
 * flag).
 */
export const loraInitWithoutApplyFlag = {
    type: "boolean",
    description: "load the LoRA adapters at scale 0, to apply later with POST /lora-adapters or per request (its `lora`), as llama-server's flag"
} as const satisfies CliOption;

/**
 * EngineOptions.loraAdapters from `--lora` and `--lora-scaled` (undefined: none), every scale 0 with `withoutApply`
 * (`--lora-init-without-apply`); throws UsageError for a bad entry.
 */
export function loraAdaptersValue(lora: string | undefined, loraScaled: string | undefined, withoutApply = false):
LoraAdapter[] | undefined {
    const entries = (raw: string | undefined): string[] => raw === undefined ? [] : raw.split(",").map((entry) => entry.trim());
    const adapters: LoraAdapter[] = entries(lora).map((path) => ({path, scale: 1}));
    for (const entry of entries(loraScaled)) {
        const colon = entry.lastIndexOf(":");
        const scale = colon < 0 || entry.slice(colon + 1).trim() === "" ? NaN : Number(entry.slice(colon + 1));
        if (!isLoraScale(scale))
            throw new UsageError(`--lora-scaled takes FILE:SCALE with a number within ±${maxLoraScale}, got ${JSON.stringify(entry)}`);
        adapters.push({path: entry.slice(0, colon), scale});
    }
    if (adapters.some((adapter) => adapter.path === ""))
        throw new UsageError("--lora and --lora-scaled take file paths, comma-separated; one is empty");
    if (adapters.length > maxLoraAdapters)
        throw new UsageError(`at most ${maxLoraAdapters} LoRA adapters, got ${adapters.length}`);
    if (withoutApply && adapters.length === 0)
        throw new UsageError("--lora-init-without-apply needs adapters (--lora or --lora-scaled)");
    return adapters.length === 0 ? undefined : withoutApply ? adapters.map(({path}) => ({path, scale: 0})) : adapters;
}
