import os from "node:os";
import path from "node:path";
import {promptCostShape, tiledAttentionQueries, tileWaste, type PromptCostShape} from "./attentionTilePadding.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel, type LlamaContext, type LlamaGrammarEvaluationStateClass, type TokenBiasClass} from "./llamaTypes.js";
import {defaultEngineOptions, defaultThreads, type EngineOptions} from "../protocol/engineOptions.js";
import type {LoraAdapter} from "../protocol/loraAdapters.js";
import type {EngineInfo, GpuBackend} from "../protocol/engineMessages.js";
import {ensureDemoModel} from "./model/demoModel.js";
import {validateModelFile} from "./model/validateModel.js";
import {checkLoraAdapterFile} from "./model/loraAdapterFile.js";
import {warmUpModel} from "./modelWarmUp.js";
import {installSampleAhead} from "./sampleAhead.js";
import {installSoloDecode} from "./soloDecode.js";
import {hasChatTemplate} from "./promptRenderer.js";
import {chooseEngineGpu} from "./gpu/gpuSelfTest.js";
import {measureDecodePairCost, type DecodePairCost} from "./decodePairs.js";
import {backendNames} from "../common/gpuBackendText.js";
import {nowMs} from "../common/clock.js";
import {errorMessage} from "../common/errorMessage.js";

export type LoadedModel = {
    llama: Llama,
    model: LlamaModel,
    context: LlamaContext,
    /** node-llama-cpp's TokenBias, for requests with a logit bias. */
    TokenBias: TokenBiasClass,
    /** node-llama-cpp's grammar state, for requests with a response format. */
    LlamaGrammarEvaluationState: LlamaGrammarEvaluationStateClass,
    info: Omit<EngineInfo, "statsIntervalMs" | "prefillChunkTokens">,
    /** A one-token decode against a two-sequence one, timed while loading (undefined: not measured). */
    decodePairCost?: DecodePairCost,
    /** Where short prompt rests are padded to attention tiles (EngineOptions.tilePadding), the model's prompt cost shape. */
    tilePadding?: PromptCostShape,
    /**
     * Where the attention goes in tiles (ggml's CPU flash attention, a model whose shape it can cost): a tile's cost on the
     * engine's threads against one thread's (`tileWaste`), for tile padding and the prompt's last piece.
     */
    attentionTileWaste?: number
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

    const {getLlama, LlamaGrammarEvaluationState, LlamaLogLevel, TokenBias} = await importNodeLlamaCpp();
    const gpu = await chooseEngineGpu(options.gpu ?? defaultEngineOptions.gpu, options.cacheDir, options.gpuTested);
    const llama = await getLlama({gpu: gpu.backend === "cpu" ? false : gpu.backend, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false});
    const backend: GpuBackend = llama.gpu === false ? "cpu" : llama.gpu;
    if (backend !== gpu.backend) {
        await llama.dispose();
        throw new Error(`node-llama-cpp loaded the ${backendNames[backend]} backend, not ${backendNames[gpu.backend]}, which passed the GPU self-test`);
    }
    const errorLevels = [LlamaLogLevel.error, LlamaLogLevel.fatal];
    const model = await loadingWithLlamaErrors(llama, errorLevels, () => llama.loadModel({
        modelPath,
        onLoadProgress: (progress) => onProgress(0.05 + 0.85 * progress)
    }));
    const threads = options.threads ?? defaultThreads(llama.cpuMathCores || os.availableParallelism(), validated.parameterCount);
    const parallel = options.parallel ?? defaultEngineOptions.parallel;
    // An absurd training context (validateModelFile treats it as unknown) must not cap the context: 2^32 − 1 reads as −1.
    const trainContextLength = validated.contextLength ?? Infinity;
    const contextSize = Math.min(options.contextSize ?? defaultEngineOptions.contextSize, trainContextLength);
    const loraAdapters = await checkedLoraAdapters(options.loraAdapters ?? []);
    let context: LlamaContext;
    let decodePairCost: DecodePairCost | undefined;
    try {
        context = await loadingWithLlamaErrors(llama, errorLevels, () =>
            model.createContext({sequences: parallel, contextSize, threads: {ideal: threads, min: 1}, ...loraOption(loraAdapters)}));
        await installSoloDecode(context, installSampleAhead(context));
        await warmUpModel(model, context);
        decodePairCost = await measureDecodePairCost(model, context);
    } catch (error) {
        await model.dispose();
        throw error;
    }
    onProgress(1);

    const vram = await llama.getVramState();
    // Reusing a prefix erases the tail of a sequence's KV cache, which recurrent and sliding-window models cannot do.
    const prefixCache = (options.prefixCache ?? defaultEngineOptions.prefixCache) && !model.fileInsights.isRecurrent &&
        !((model.fileInsights.swaSize ?? 0) > 0);
    // The tiles are ggml's CPU flash attention's; a GPU's kernels have no such step.
    const costShape = backend === "cpu" && context.flashAttention !== false ? promptCostShape(model.fileInfo) : undefined;
    const tilePadding = prefixCache && (options.tilePadding ?? defaultEngineOptions.tilePadding) ? costShape : undefined;
    return {
        llama,
        model,
        context,
        TokenBias,
        LlamaGrammarEvaluationState,
        ...(decodePairCost !== undefined ? {decodePairCost} : {}),
        ...(tilePadding !== undefined ? {tilePadding} : {}),
        ...(costShape !== undefined ? {attentionTileWaste: tileWaste(tiledAttentionQueries, costShape.queryHeads, threads)} : {}),
        info: {
            pid: process.pid,
            backend,
            gpuDevices: backend === "cpu" ? [] : await llama.getGpuDeviceNames(),
            gpuFallbacks: gpu.fallbacks,
            vramTotalBytes: vram.total,
            vramUsedBytes: vram.used,
            model: {
                path: modelPath,
                name: validated.name,
                architecture: validated.architecture,
                parameterCount: validated.parameterCount,
                quantization: validated.quantization,
                sizeBytes: validated.sizeBytes,
                trainContextLength: validated.contextLength ?? context.contextSize,
                ...(validated.vocabSize !== undefined ? {vocabularySize: validated.vocabSize} : {}),
                toolCalling: hasChatTemplate(model),
                fillInMiddle: [model.tokens.infill.prefix, model.tokens.infill.suffix, model.tokens.infill.middle]
                    .every((token) => token != null)
            },
            contextSize: context.contextSize,
            parallel,
            threads,
            prefixCache,
            tilePadding: tilePadding !== undefined,
            // Saved states are whole sequences' KV caches, restored and then cut after the shared prefix: prefix caching's precondition.
            promptCacheMiB: prefixCache ? options.promptCacheMiB ?? defaultEngineOptions.promptCacheMiB : 0,
            loraAdapters,
            loadMs: nowMs() - started
        }
    };
}

/** The adapters with absolute paths, each checked to be a LoRA adapter file (loraAdapterFile.ts). */
async function checkedLoraAdapters(adapters: readonly LoraAdapter[]): Promise<LoraAdapter[]> {
    const checked: LoraAdapter[] = [];
    for (const adapter of adapters) {
        const file = path.resolve(adapter.path);
        await checkLoraAdapterFile(file).catch((error: unknown) => {
            throw new Error(`LoRA adapter ${file}: ${errorMessage(error)}`, {cause: error});
        });
        checked.push({path: file, scale: adapter.scale});
    }
    return checked;
}

function loraOption(adapters: readonly LoraAdapter[]): {lora?: {adapters: Array<{filePath: string, scale: number}>}} {
    return adapters.length === 0 ? {} : {lora: {adapters: adapters.map(({path: filePath, scale}) => ({filePath, scale}))}};
}

// ---------------------------------------------------------------------------------------------
// llama.cpp explains why a model failed to load only in its log ("error loading model: missing
// tensor …"); node-llama-cpp then throws a bare "Failed to load model". This adds the logged reason.

type LogLevel = Parameters<Llama["logger"]>[0];

/** How many of the last error lines the message keeps. */
const keptLines = 3;

/** Runs `load`; when it throws, rethrows with llama.cpp's last error log lines appended to the message. */
async function loadingWithLlamaErrors<T>(llama: Llama, errorLevels: readonly LogLevel[], load: () => Promise<T>): Promise<T> {
    const previous = llama.logger;
    const errors: string[] = [];
    llama.logger = (level, message) => {
        if (errorLevels.includes(level))
            errors.push(...message.split("\n").map((line) => line.trim()).filter((line) => line !== ""));
        previous(level, message);
    };
    try {
        return await load();
    } catch (error) {
        // The native log reaches JS asynchronously: let lines queued before the failure arrive.
        await new Promise((resolve) => setImmediate(resolve));
        const reasons = [...new Set(errors.map(reasonOf))].filter((line) => !/failed to load model$/i.test(line)).slice(-keptLines);
        const message = errorMessage(error);
        if (reasons.length === 0 || reasons.every((reason) => message.includes(reason)))
            throw error;
        throw new Error(`${message}: ${reasons.join("; ")}`, {cause: error});
    } finally {
        llama.logger = previous;
    }
}

/** "llama_model_load: error loading model: missing tensor 'x'" → "missing tensor 'x'". */
function reasonOf(line: string): string {
    return line.replace(/^(?:[a-z_]+:\s*)?error loading model:\s*/i, "").replace(/^[a-z_]+:\s*/i, "");
}

