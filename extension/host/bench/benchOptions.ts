import type {LoraAdapter} from "../../../protocol/loraAdapters.js";
import type {DemoModelSize} from "../../../engine/model/demoModel.js";
import type {GpuSetting} from "../../../protocol/engineOptions.js";
import type {EngineMode} from "../engineClient/engineClient.js";
import type {HttpTargetOptions} from "./openaiHttpTarget.js";

/** `inference-monitor bench` options (cli/benchArgs.ts reads them from flags that mirror vLLM's `benchmark_serving.py`). */
export type BenchOptions = {
    /** GGUF file; default the built-in demo model of `demoModelSize`. */
    modelPath?: string,
    demoModelSize: DemoModelSize,
    numPrompts: number,
    /** Requests sent before the measured ones and counted in no metric (vLLM's `--num-warmups`): copies of the first request. */
    numWarmups: number,
    inputLen: number,
    /** A prefix of about this many tokens shared by every prompt, before its own `inputLen` (vLLM's `--random-prefix-len`). */
    prefixLen: number,
    outputLen: number,
    /**
     * vLLM's `--random-range-ratio`: each request's input and output lengths are drawn uniformly from
     * [⌊len·(1−R)⌋, ⌈len·(1+R)⌉] (output at least 1); 0 = every request alike. In [0, 1).
     */
    rangeRatio: number,
    /** Most requests in flight at once; Infinity = no limit. */
    maxConcurrency: number,
    /** Poisson arrival rate in requests/s; Infinity = send all at once. */
    requestRate: number,
    parallel: number,
    threads?: number,
    /** EngineOptions.prefixCache (`--prefix-cache on|off`). */
    prefixCache: boolean,
    /** EngineOptions.tilePadding (`--tile-padding on|off`). */
    tilePadding: boolean,
    /** EngineOptions.promptCacheMiB (`--prompt-cache`); absent: the default. */
    promptCacheMiB?: number,
    /** EngineOptions.prefillChunkTokens (`--prefill-chunk`); absent: the backend's default. */
    prefillChunkTokens?: number,
    /** EngineOptions.gpu (`--gpu`). */
    gpu: GpuSetting,
    /** EngineOptions.loraAdapters (`--lora`, `--lora-scaled`); absent: none. */
    loraAdapters?: LoraAdapter[],
    contextSize?: number,
    stats: boolean,
    statsIntervalMs: number,
    /** 0 = no Prometheus endpoint. */
    prometheusPort: number,
    mode: EngineMode,
    seed: number,
    jsonPath?: string,
    /** Print the progress bar (default: when stderr is a TTY). */
    progress: boolean,
    /** Benchmark this OpenAI-compatible server over HTTP instead of starting an engine (`--base-url`); the engine fields go unused. */
    http?: HttpTargetOptions
};
