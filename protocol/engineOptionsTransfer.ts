import {demoModelSizeNames, gpuSettings, type EngineOptions} from "./engineOptions.js";
import {ProtocolError, expectObject, expectOneOf, optionalBoolean, optionalInteger, optionalNumber, optionalString} from "./validation.js";
import {gpuBackends, parseGpuFallbacks} from "./engineMessages.js";
import {parseLoraAdapters} from "./loraAdapters.js";

/** Environment variable carrying the engine options (JSON) to a spawned engine process. */
export const engineOptionsEnv = "INFERENCE_MONITOR_ENGINE_OPTIONS";

/** Everything but the stats channel, which travels in its own variables. */
export type TransferableEngineOptions = Omit<EngineOptions, "statsChannel">;

export function serializeEngineOptions(options: EngineOptions): string {
    const {statsChannel: _omit, ...rest} = options;
    return JSON.stringify(rest satisfies TransferableEngineOptions);
}

export function parseEngineOptionsJson(json: string): EngineOptions {
    let value: unknown;
    try {
        value = JSON.parse(json);
    } catch {
        throw new ProtocolError(`${engineOptionsEnv} is not valid JSON`);
    }
    const obj = expectObject(value, "engine options");
    const what = "engine options";
    const options: EngineOptions = {};
    const modelPath = optionalString(obj, "modelPath", what);
    if (modelPath !== undefined) options.modelPath = modelPath;
    if (obj.demoModelSize !== undefined)
        options.demoModelSize = expectOneOf(obj, "demoModelSize", demoModelSizeNames, what);
    const cacheDir = optionalString(obj, "cacheDir", what);
    if (cacheDir !== undefined) options.cacheDir = cacheDir;
    if (obj.gpu !== undefined)
        options.gpu = expectOneOf(obj, "gpu", gpuSettings, what);
    if (obj.gpuTested !== undefined) {
        const tested = expectObject(obj.gpuTested, `${what}.gpuTested`);
        options.gpuTested = {
            backend: expectOneOf(tested, "backend", gpuBackends, `${what}.gpuTested`),
            fallbacks: parseGpuFallbacks(tested, "fallbacks", `${what}.gpuTested`)
        };
    }
    const contextSize = optionalInteger(obj, "contextSize", what);
    if (contextSize !== undefined) options.contextSize = contextSize;
    const parallel = optionalInteger(obj, "parallel", what);
    if (parallel !== undefined) options.parallel = parallel;
    const threads = optionalInteger(obj, "threads", what);
    if (threads !== undefined) options.threads = threads;
    const prefillChunkTokens = optionalInteger(obj, "prefillChunkTokens", what);
    if (prefillChunkTokens !== undefined) options.prefillChunkTokens = prefillChunkTokens;
    const maxWaitingRequests = optionalInteger(obj, "maxWaitingRequests", what);
    if (maxWaitingRequests !== undefined) options.maxWaitingRequests = maxWaitingRequests;
    const prefixCache = optionalBoolean(obj, "prefixCache", what);
    if (prefixCache !== undefined) options.prefixCache = prefixCache;
    const tilePadding = optionalBoolean(obj, "tilePadding", what);
    if (tilePadding !== undefined) options.tilePadding = tilePadding;
    const promptCacheMiB = optionalInteger(obj, "promptCacheMiB", what);
    if (promptCacheMiB !== undefined) options.promptCacheMiB = promptCacheMiB;
    if (obj.loraAdapters !== undefined)
        options.loraAdapters = parseLoraAdapters(obj, "loraAdapters", what);
    const statsIntervalMs = optionalNumber(obj, "statsIntervalMs", what);
    if (statsIntervalMs !== undefined) options.statsIntervalMs = statsIntervalMs;
    const allowDebugRequests = optionalBoolean(obj, "allowDebugRequests", what);
    if (allowDebugRequests !== undefined) options.allowDebugRequests = allowDebugRequests;
    return options;
}
