import * as vscode from "vscode";
import {defaultEngineOptions, defaultPromptCacheMiB, gpuSettings, maxPrefillChunkTokens, maxPromptCacheMiB, type GpuSetting} from "../../protocol/engineOptions.js";
import {targetKinds, type TargetKind} from "../../protocol/targetView.js";
import {isObject, isOneOf} from "../../protocol/validation.js";
import type {EngineClientOptions, EngineMode} from "../host/engineClient/engineClient.js";
import {defaultApiPort} from "../host/openai/apiServer.js";
import type {LoraAdapter} from "../../protocol/loraAdapters.js";
import {readLoraAdaptersSetting} from "./loraAdaptersSetting.js";

export const configSection = "inferenceMonitor";

/** The monitoring proxy's default port: the CLI's (`proxy --port`), next to serve's 8719 and watch's 8720. */
const defaultProxyPort = 8721;

/** The extension's settings, read live (every call reads the current configuration). */
export type MonitorSettings = {
    modelPath: string,
    gpu: GpuSetting,
    contextSize: number,
    parallelSequences: number,
    threads: number,
    /** Chunked prefill's prompt tokens per step (EngineOptions.prefillChunkTokens); 0 = the backend's default. */
    prefillChunkTokens: number,
    /** EngineOptions.prefixCache. */
    prefixCache: boolean,
    /** The prompt cache's limit in MiB (EngineOptions.promptCacheMiB); 0 = off. */
    promptCacheMiB: number,
    /** EngineOptions.tilePadding. */
    tilePadding: boolean,
    /** LoRA adapters for the model in `modelPath` (EngineOptions.loraAdapters); never applied to the built-in demo model. */
    loraAdapters: LoraAdapter[],
    engineMode: EngineMode,
    statsIntervalMs: number,
    logIntervalS: number,
    prometheusPort: number,
    stallThresholdMs: number,
    /** Serve the OpenAI-compatible API while a model runs. */
    serverEnabled: boolean,
    /** Its port on 127.0.0.1 (1..65535). */
    serverPort: number,
    /** The directory of llama.cpp's slot actions on it (ApiServerOptions.slotSavePath); "" = none. */
    serverSlotSavePath: string,
    /** Servers to watch (Attach to Server…); their API keys live in SecretStorage, not here. */
    targets: TargetSetting[],
    /** Port of the monitoring proxy on 127.0.0.1 (Start Monitoring Proxy…). */
    proxyPort: number
};

/** One entry of `inferenceMonitor.targets`. */
export type TargetSetting = {url: string, name?: string, kind?: TargetKind};

export function readSettings(): MonitorSettings {
    const config = vscode.workspace.getConfiguration(configSection);
    const gpu = config.get<string>("gpu", "auto");
    const mode = config.get<string>("engineMode", "process");
    return {
        modelPath: config.get<string>("modelPath", "").trim(),
        gpu: isOneOf(gpu, gpuSettings) ? gpu : "auto",
        contextSize: Math.max(128, Math.floor(config.get<number>("contextSize", 4096))),
        parallelSequences: Math.min(64, Math.max(1, Math.floor(config.get<number>("parallelSequences", 4)))),
        threads: Math.max(0, Math.floor(config.get<number>("threads", 0))),
        prefillChunkTokens: Math.min(maxPrefillChunkTokens, Math.max(0, Math.floor(config.get<number>("prefillChunkTokens", 0)))),
        prefixCache: config.get<boolean>("prefixCache", defaultEngineOptions.prefixCache) !== false,
        promptCacheMiB: Math.min(maxPromptCacheMiB, Math.max(0, Math.floor(config.get<number>("promptCacheMiB", defaultPromptCacheMiB)))),
        tilePadding: config.get<boolean>("tilePadding", defaultEngineOptions.tilePadding) !== false,
        loraAdapters: readLoraAdaptersSetting(config.get<unknown>("loraAdapters", [])),
        engineMode: mode === "inProcess" ? "inProcess" : "process",
        statsIntervalMs: Math.max(0, Math.floor(config.get<number>("statsIntervalMs", 1000))),
        logIntervalS: Math.max(0, config.get<number>("logIntervalS", 10)),
        prometheusPort: Math.min(65535, Math.max(0, Math.floor(config.get<number>("prometheusPort", 0)))),
        stallThresholdMs: Math.max(100, Math.floor(config.get<number>("stallThresholdMs", 1000))),
        serverEnabled: config.get<boolean>("server.enabled", true) !== false,
        serverPort: validPort(config.get<number>("server.port", defaultApiPort)) ?? defaultApiPort,
        serverSlotSavePath: config.get<string>("server.slotSavePath", "").trim(),
        targets: readTargets(config.get<unknown>("targets", [])),
        proxyPort: validPort(config.get<number>("proxy.port", defaultProxyPort)) ?? defaultProxyPort
    };
}

/** The valid entries of `inferenceMonitor.targets` (http/https URLs, without a trailing slash), in order, each URL once. */
export function readTargets(value: unknown): TargetSetting[] {
    const out: TargetSetting[] = [];
    for (const entry of Array.isArray(value) ? value as unknown[] : []) {
        if (!isObject(entry) || typeof entry.url !== "string")
            continue;
        let url: URL;
        try {
            url = new URL(entry.url);
        } catch {
            continue;
        }
        if (url.protocol !== "http:" && url.protocol !== "https:")
            continue;
        const clean = url.href.replace(/\/+$/, "");
        if (out.some((target) => target.url === clean))
            continue;
        out.push({url: clean, ...(typeof entry.name === "string" && entry.name !== "" ? {name: entry.name} : {}),
            ...(isOneOf(entry.kind, targetKinds) ? {kind: entry.kind} : {})});
    }
    return out;
}

function validPort(value: unknown): number | undefined {
    return typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= 65535 ? value : undefined;
}

/** Engine options from the settings, for a given model (undefined = built-in demo model). */
export function engineClientOptions(settings: MonitorSettings, modelPath: string | undefined, cacheDir: string): EngineClientOptions {
    return {
        mode: settings.engineMode,
        gpu: settings.gpu,
        contextSize: settings.contextSize,
        parallel: settings.parallelSequences,
        statsIntervalMs: settings.statsIntervalMs,
        cacheDir,
        ...(settings.threads > 0 ? {threads: settings.threads} : {}),
        ...(settings.prefillChunkTokens > 0 ? {prefillChunkTokens: settings.prefillChunkTokens} : {}),
        prefixCache: settings.prefixCache,
        promptCacheMiB: settings.promptCacheMiB,
        tilePadding: settings.tilePadding,
        ...(modelPath !== undefined ? {modelPath} : {}),
        // Adapters are made for one model: the built-in demo model never gets the user's.
        ...(modelPath !== undefined && settings.loraAdapters.length > 0 ? {loraAdapters: settings.loraAdapters} : {})
    };
}
