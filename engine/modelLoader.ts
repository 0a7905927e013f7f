import os from "node:os";
import {importNodeLlamaCpp, type Llama, type LlamaModel, type LlamaContext} from "./llamaTypes.js";
import {defaultEngineOptions, defaultThreads, type EngineOptions} from "../protocol/engineOptions.js";
import type {EngineInfo, GpuBackend} from "../protocol/engineMessages.js";
import {ensureDemoModel} from "./model/demoModel.js";
import {validateModelFile} from "./model/validateModel.js";
import {nowMs} from "../common/clock.js";

export type LoadedModel = {
    llama: Llama,
    model: LlamaModel,
    context: LlamaContext,
    info: Omit<EngineInfo, "statsIntervalMs">
};

/**
 * Resolves the model file (the built-in demo model when none is given), validates it in JS — a bad
 * file must never reach llama.cpp, which aborts the whole process on some malformed metadata — then
 * loads it with node-llama-cpp and creates the context. Never builds llama.cpp from source.
 */
export async function loadModel(options: EngineOptions, onProgress: (progress: number) => void): Promise<LoadedModel> {
    const started = nowMs();
    const modelPath = options.modelPath ?? await ensureDemoModel({
        size: options.demoModelSize ?? defaultEngineOptions.demoModelSize,
        ...(options.cacheDir !== undefined ? {cacheDir: options.cacheDir} : {})
    });
    const validated = await validateModelFile(modelPath);
    onProgress(0.05);

    const {getLlama, LlamaLogLevel} = await importNodeLlamaCpp();
    const gpuSetting = options.gpu ?? defaultEngineOptions.gpu;
    const llama = await getLlama({
        gpu: gpuSetting === "off" ? false : gpuSetting,
        build: "never",
        logLevel: LlamaLogLevel.error,
        progressLogs: false
    });
    const model = await llama.loadModel({
        modelPath,
        onLoadProgress: (progress) => onProgress(0.05 + 0.85 * progress)
    });
    const threads = options.threads ?? defaultThreads(llama.cpuMathCores || os.availableParallelism());
    const parallel = options.parallel ?? defaultEngineOptions.parallel;
    const contextSize = Math.min(options.contextSize ?? defaultEngineOptions.contextSize, model.trainContextSize);
    let context: LlamaContext;
    try {
        context = await model.createContext({sequences: parallel, contextSize, threads: {ideal: threads, min: 1}});
    } catch (error) {
        await model.dispose();
        throw error;
    }
    onProgress(1);

    const vram = await llama.getVramState();
    const backend: GpuBackend = llama.gpu === false ? "cpu" : llama.gpu;
    return {
        llama,
        model,
        context,
        info: {
            pid: process.pid,
            backend,
            gpuDevices: backend === "cpu" ? [] : await llama.getGpuDeviceNames(),
            vramTotalBytes: vram.total,
            vramUsedBytes: vram.used,
            model: {
                path: modelPath,
                name: validated.name,
                architecture: validated.architecture,
                parameterCount: validated.parameterCount,
                quantization: validated.quantization,
                sizeBytes: validated.sizeBytes,
                trainContextLength: model.trainContextSize
            },
            contextSize: context.contextSize,
            parallel,
            threads,
            // Reusing a prefix erases the tail of a sequence's KV cache, which recurrent and sliding-window models cannot do.
            prefixCache: (options.prefixCache ?? defaultEngineOptions.prefixCache) && !model.fileInsights.isRecurrent &&
                !((model.fileInsights.swaSize ?? 0) > 0),
            loadMs: nowMs() - started
        }
    };
}
