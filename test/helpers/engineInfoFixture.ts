import type {EngineInfo} from "../../protocol/engineMessages.js";

/** A ready engine's info for StatsManager/logger tests (a CUDA backend, so GPU wording shows). */
export function engineInfo(overrides: Partial<EngineInfo> = {}): EngineInfo {
    return {
        pid: 4242, backend: "cuda", gpuDevices: ["Test GPU"], gpuFallbacks: [], vramTotalBytes: 8e9, vramUsedBytes: 1e9,
        model: {path: "/models/tiny.gguf", name: "tiny-test", architecture: "llama", parameterCount: 1e6, quantization: "F16",
            sizeBytes: 2e6, trainContextLength: 4096},
        contextSize: 2048, parallel: 4, threads: 2, prefixCache: true, tilePadding: false, promptCacheMiB: 0, prefillChunkTokens: 512, loraAdapters: [], statsIntervalMs: 200, loadMs: 10,
        ...overrides
    };
}
