import * as vscode from "vscode";
import {gpuSettings, type GpuSetting} from "../../protocol/engineOptions.js";
import {isOneOf} from "../../protocol/validation.js";
import type {EngineClientOptions, EngineMode} from "../host/engineClient/engineClient.js";
import {defaultApiPort} from "../host/openai/apiServer.js";

export const configSection = "inferenceMonitor";

/** The extension's settings, read live (every call reads the current configuration). */
export type MonitorSettings = {
    modelPath: string,
    gpu: GpuSetting,
    contextSize: number,
    parallelSequences: number,
    threads: number,
    engineMode: EngineMode,
    statsIntervalMs: number,
    logIntervalS: number,
    prometheusPort: number,
    stallThresholdMs: number,
    /** Serve the OpenAI-compatible API while a model runs. */
    serverEnabled: boolean,
    /** Its port on 127.0.0.1 (1..65535). */
    serverPort: number
};

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
        engineMode: mode === "inProcess" ? "inProcess" : "process",
        statsIntervalMs: Math.max(0, Math.floor(config.get<number>("statsIntervalMs", 1000))),
        logIntervalS: Math.max(0, config.get<number>("logIntervalS", 10)),
        prometheusPort: Math.min(65535, Math.max(0, Math.floor(config.get<number>("prometheusPort", 0)))),
        stallThresholdMs: Math.max(100, Math.floor(config.get<number>("stallThresholdMs", 1000))),
        serverEnabled: config.get<boolean>("server.enabled", true) !== false,
        serverPort: validPort(config.get<number>("server.port", defaultApiPort)) ?? defaultApiPort
    };
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
        ...(modelPath !== undefined ? {modelPath} : {})
    };
}
