import type {GpuBackend, GpuFallback} from "./engineMessages.js";
import {checkLoraAdapters, type LoraAdapter} from "./loraAdapters.js";

/** Sizes of the built-in demo model (see engine/model/demoModel.ts). */
export const demoModelSizeNames = ["tiny", "small", "medium"] as const;
export type DemoModelSize = typeof demoModelSizeNames[number];

export const gpuSettings = ["auto", "cuda", "vulkan", "metal", "off"] as const;
export type GpuSetting = typeof gpuSettings[number];

/** The GPU self-test's outcome (engine/gpu/gpuSelfTest.ts): the backend to load and the ones skipped on the way. */
export type GpuChoice = {backend: GpuBackend, fallbacks: GpuFallback[]};

/** Where the stats worker reports to; handed over through the environment or workerData, never argv. */
export type StatsChannelTarget = {url: string, secret: string};

/** How to run an engine. Every field is optional; defaults are documented per field. */
export type EngineOptions = {
    /** GGUF file to serve. Default: the built-in demo model (`demoModelSize`), generated once into a cache dir. */
    modelPath?: string,
    /** Size of the built-in demo model when `modelPath` is not given. Default `"small"` (~20 M params). */
    demoModelSize?: DemoModelSize,
    /** Cache dir for the built-in demo model. Default `$INFERENCE_MONITOR_CACHE_DIR` or `~/.cache/inference-monitor`. */
    cacheDir?: string,
    /** GPU backend. Default `"auto"`: CUDA, Vulkan or Metal when present, else CPU. */
    gpu?: GpuSetting,
    /**
     * What an earlier engine of this host chose for the same `gpu` setting after its GPU self-test
     * (engine/gpu/gpuSelfTest.ts): loaded as is, without testing again (EngineClient passes it; it forgets
     * it when an engine crashes). Default: test.
     */
    gpuTested?: GpuChoice,
    /**
     * Context size per sequence in tokens: the most one request (prompt + output) may hold. The KV cache
     * has `contextSize × parallel` cells, as node-llama-cpp gives each sequence its own. Default 4096
     * (capped at the model's training context).
     */
    contextSize?: number,
    /** Parallel sequences (requests evaluated together in one batch). Default 4. */
    parallel?: number,
    /**
     * CPU threads for evaluation. Default ({@link defaultThreads}): all math cores (llama.cpp's own default) for a model
     * of at least {@link smallModelParameters} parameters; half of them, at least 1, for a smaller one, whose steps are
     * too short to share across threads.
     */
    threads?: number,
    /**
     * Prefix caching, as vLLM's and llama.cpp's servers do: a finished request's tokens stay in its
     * sequence's KV cache; a new request goes to the free sequence whose cache shares the longest prefix
     * with its prompt and evaluates only the rest. Default true.
     */
    prefixCache?: boolean,
    /**
     * The prompt cache's limit in MiB, as llama-server's `--cache-ram` (0: off; needs `prefixCache`). When a free
     * sequence is given to a request that keeps under half of the tokens it holds, their KV state is first saved to a
     * file in a private directory under the system's temporary directory; a later request whose prompt shares a longer
     * prefix with a saved state than with any free sequence restores it instead of evaluating those tokens again. Saved
     * states beyond the limit go oldest first; the directory is removed when the engine stops. Default
     * {@link defaultPromptCacheMiB}.
     */
    promptCacheMiB?: number,
    /**
     * Chunked prefill: while requests are decoding, the most prompt tokens evaluated per engine step
     * (taken by the long prompts prefilling at once first come, first served: engine/prefillBudget.ts); a longer
     * prompt is spread over several steps, each batched with the running requests' decodes, so they keep
     * generating while it prefills (vLLM's
     * `max_num_batched_tokens`). With nothing decoding, a prompt is evaluated at once. Default: 128 on
     * CPU, 512 on a GPU. Measured on the 2-vCPU VM (demo `small`, 1 thread, 4 sequences; 2026-12-05):
     * with 32, a typical ~90-token prompt arriving while others decode took three steps, and at max
     * concurrency 8 (`bench`, 32 × 48-in / 64-out) P99 ITL was 31–36 ms (f16) and 17–20 ms (q4_0) against
     * 11–13 and 10–12 with 128, output tok/s within noise on f16 and 613–760 vs 674–907 on q4_0. A
     * ~2000-token prompt (`npm run bench:prefill`) stalls running requests at either size on this CPU (P99
     * ITL during its prefill 125 ms with 32, 154 ms with 128, 9 ms steady: a chunk's step grows with the
     * prompt's position here, see README), and its TTFT halves with 128 (4.2 → 2.0 s). The price: at random
     * arrivals near saturation P99 ITL is higher with 128 (f16 68–86 vs 31–45 ms), TTFT p50 lower (1.4–3×).
     */
    prefillChunkTokens?: number,
    /**
     * On the CPU, with prefix caching: where a request's input is all cached but a short rest (under 65 tokens) deep in the
     * cache, some cached tokens before the rest are evaluated again so that llama.cpp's flash attention takes it in tiles,
     * where the model's shape says that is faster (engine/attentionTilePadding.ts). Default true.
     */
    tilePadding?: boolean,
    /**
     * Requests that may wait for a sequence at once; one arriving when this many wait (and no sequence
     * is free) is refused with error code `queue_full`, naming the cap. 0 = never wait: refuse when
     * every sequence is busy. Preempted requests always go back in line. Default 1024.
     */
    maxWaitingRequests?: number,
    /**
     * LoRA adapters (GGUF files made for this model), applied to every request with their scales, as llama-server's
     * `--lora` / `--lora-scaled` (protocol/loraAdapters.ts). Default none.
     */
    loraAdapters?: LoraAdapter[],
    /** Stats snapshot interval in ms. Default 1000; 0 turns the stats worker off entirely. */
    statsIntervalMs?: number,
    /** Where the stats worker connects. Required when `statsIntervalMs` > 0. */
    statsChannel?: StatsChannelTarget,
    /** Accept test-only request fields (`debugBlockMs`). Default false. */
    allowDebugRequests?: boolean
};

export const defaultEngineOptions = {
    demoModelSize: "small",
    gpu: "auto",
    contextSize: 4096,
    parallel: 4,
    prefixCache: true,
    tilePadding: true,
    promptCacheMiB: 2048,
    maxWaitingRequests: 1024,
    statsIntervalMs: 1000,
    allowDebugRequests: false
} as const satisfies Partial<EngineOptions>;

/** The default {@link EngineOptions.promptCacheMiB}. */
export const defaultPromptCacheMiB = defaultEngineOptions.promptCacheMiB;
/** The largest {@link EngineOptions.promptCacheMiB} (1 TiB). */
export const maxPromptCacheMiB = 1 << 20;

/** The largest {@link EngineOptions.prefillChunkTokens} the engine accepts (the CLI flag and the VS Code setting share it). */
export const maxPrefillChunkTokens = 1 << 20;

/** Default {@link EngineOptions.prefillChunkTokens} for a backend. */
export function defaultPrefillChunkTokens(backend: "cuda" | "vulkan" | "metal" | "cpu"): number {
    return backend === "cpu" ? 128 : 512;
}

/**
 * Below this many parameters a model's decode step is so short that llama.cpp's threads spend it waiting on each other
 * and on the Node threads beside them. Measured on the 2-vCPU VM (2026-12-06, `inference-monitor bench`, process mode,
 * 4 sequences, interleaved runs), output tok/s with 1 vs 2 threads: the demo `small` model (20 M parameters, f16) 368–378
 * vs 252–259 at concurrency 4; `medium` (99 M) f16 90–94 vs 136–138 at 4 and 58–74 vs 82–115 at 1, q8_0 78–92 vs
 * 141–143, q4_0 226–262 vs 271–387. Every model people run is far above it.
 */
export const smallModelParameters = 50_000_000;

/**
 * Default threads on a machine with `mathCores` cores (llama.cpp's count: physical cores) for a model of
 * `parameterCount` parameters (unknown: the small-model rule): see {@link EngineOptions.threads}.
 */
export function defaultThreads(mathCores: number, parameterCount?: number): number {
    if (parameterCount !== undefined && parameterCount >= smallModelParameters)
        return Math.max(1, mathCores);
    return Math.max(1, Math.floor(mathCores / 2));
}

/** Checks numeric options up front so a bad setting is a clear error, not a native failure. */
export function checkEngineOptions(options: EngineOptions): void {
    const positiveInt = (name: string, value: number | undefined, max: number) => {
        if (value !== undefined && (!Number.isInteger(value) || value < 1 || value > max))
            throw new RangeError(`${name} must be an integer between 1 and ${max}, got ${value}`);
    };
    positiveInt("contextSize", options.contextSize, 1 << 22);
    positiveInt("parallel", options.parallel, 256);
    positiveInt("threads", options.threads, 1024);
    positiveInt("prefillChunkTokens", options.prefillChunkTokens, maxPrefillChunkTokens);
    const maxWaiting = options.maxWaitingRequests;
    if (maxWaiting !== undefined && (!Number.isInteger(maxWaiting) || maxWaiting < 0 || maxWaiting > 1 << 20))
        throw new RangeError(`maxWaitingRequests must be an integer between 0 and ${1 << 20}, got ${maxWaiting}`);
    if (options.loraAdapters !== undefined)
        checkLoraAdapters(options.loraAdapters);
    if (options.statsIntervalMs !== undefined && (!Number.isFinite(options.statsIntervalMs) || options.statsIntervalMs < 0))
        throw new RangeError(`statsIntervalMs must be >= 0, got ${options.statsIntervalMs}`);
    if ((options.statsIntervalMs ?? defaultEngineOptions.statsIntervalMs) > 0 && options.statsChannel === undefined)
        throw new RangeError("statsChannel is required when statsIntervalMs > 0");
}
