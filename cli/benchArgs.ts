/** `inference-monitor bench` flags (they mirror vLLM's `benchmark_serving.py`), declared once for parsing and --help. */
import type {BenchOptions} from "../extension/host/bench/benchOptions.js";
import {benchEndpoints, normalizeBaseUrl} from "../extension/host/bench/openaiHttpTarget.js";
import {demoModelSizeNames} from "../engine/model/demoModel.js";
import {errorMessage} from "../common/errorMessage.js";
import {parseCommandArgs, UsageError, type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {
    gpuFlag, gpuValue, loraAdaptersValue, loraFlag, loraScaledFlag, prefillChunkFlag, prefillChunkValue, prefixCacheFlag, prefixCacheValue,
    promptCacheFlag, promptCacheValue, tilePaddingFlag, tilePaddingValue
} from "./engineFlags.js";
import {choiceValue, fractionValue, integerValue, portValue, positiveNumberValue} from "./optionValues.js";

/** Read when --api-key is absent, as vLLM's benchmark does. */
const openAiKeyEnvVar = "OPENAI_API_KEY";

export const benchCommandLine = {
    name: "bench",
    summary: "vLLM-style serving benchmark on the engine, or on any OpenAI-compatible server (--base-url)",
    options: {
        "model": {type: "string", placeholder: "FILE", description: "GGUF model (default: built-in demo model, --demo-size)"},
        "demo-size": {type: "string", placeholder: "SIZE", description: "tiny | small | medium (default small)"},
        "num-prompts": {type: "string", placeholder: "N", description: "requests to send (default 100)"},
        "num-warmups": {type: "string", placeholder: "N",
            description: "first send N copies of the first request (at most --max-concurrency at once), counted in no metric (default 0)"},
        "input-len": {type: "string", placeholder: "N", description: "prompt length in tokens, approximately (default 64)"},
        "prefix-len": {type: "string", placeholder: "N",
            description: "a prefix of ~N tokens shared by every prompt, before its own input-len (vLLM's --random-prefix-len; default 0)"},
        "output-len": {type: "string", placeholder: "N", description: "tokens to generate per request, exactly (default 64)"},
        "random-range-ratio": {type: "string", placeholder: "R",
            description: "each request's input and output lengths drawn uniformly from len·(1−R)…len·(1+R), 0 ≤ R < 1 (vLLM's; default 0: all alike)"},
        "max-concurrency": {type: "string", placeholder: "N", description: "most requests in flight (default: no limit)"},
        "request-rate": {type: "string", placeholder: "R",
            description: "Poisson arrivals per second, the first at 0 (default inf: all at once); with --max-concurrency, arrived requests wait for a slot"},
        "parallel": {type: "string", placeholder: "N", description: "engine sequences evaluated together (default 4)"},
        "threads": {type: "string", placeholder: "N", description: "CPU threads (default: engine default)"},
        "context-size": {type: "string", placeholder: "N", description: "KV cache tokens (default 4096)"},
        "prefix-cache": prefixCacheFlag,
        "prompt-cache": promptCacheFlag,
        "prefill-chunk": prefillChunkFlag,
        "tile-padding": tilePaddingFlag,
        "gpu": gpuFlag,
        "lora": loraFlag,
        "lora-scaled": loraScaledFlag,
        "stats": {type: "string", placeholder: "on|off",
            description: "stats collection; off = no stats worker, StatsManager or loggers (default on)"},
        "stats-interval-ms": {type: "string", placeholder: "N", description: "stats snapshot interval (default 1000)"},
        "prometheus-port": {type: "string", placeholder: "N", description: "serve /metrics on 127.0.0.1:N (default 0 = off)"},
        "in-process": {type: "boolean", description: "run the engine inside this process"},
        "seed": {type: "string", placeholder: "N", description: "sampling and arrival seed (default 0)"},
        "json": {type: "string", placeholder: "FILE", description: "write vLLM's result keys to FILE"},
        "no-progress": {type: "boolean", description: "no progress bar"},
        "base-url": {type: "string", placeholder: "URL",
            description: "benchmark an OpenAI-compatible server over HTTP instead (e.g. http://127.0.0.1:8719/v1); no engine is started"},
        "api-key": {type: "string", placeholder: "KEY", description: `with --base-url: send Authorization: Bearer KEY (default $${openAiKeyEnvVar})`},
        "endpoint": {type: "string", placeholder: "chat|completions", description: "with --base-url: the API to stream from (default completions)"},
        "model-name": {type: "string", placeholder: "NAME", description: "with --base-url: the request's model (default: the first of GET /v1/models)"},
        "no-cache-prompt": {type: "boolean",
            description: "with --base-url: send llama.cpp's `cache_prompt: false` (llama-server's prefix cache off; other servers ignore it)"}
    },
    details: "With --base-url, the engine flags (--model, --demo-size, --parallel, --threads, --context-size, --prefix-cache, --prompt-cache, --prefill-chunk, --tile-padding, --gpu, --lora, " +
        "--lora-scaled, --stats, --stats-interval-ms, --prometheus-port, --in-process) do not apply."
} satisfies CommandLine<CliOptions>;

type BenchValues = OptionValues<typeof benchCommandLine.options>;

/** Flags of the local engine, meaningless with --base-url. */
const engineFlags = ["model", "demo-size", "parallel", "threads", "context-size", "prefix-cache", "prompt-cache", "prefill-chunk", "tile-padding", "gpu", "lora",
    "lora-scaled", "stats", "stats-interval-ms", "prometheus-port", "in-process"] as const;
/** Flags of the HTTP target, meaningless without --base-url. */
const httpFlags = ["api-key", "endpoint", "model-name", "no-cache-prompt"] as const;

/** The bench options from parsed flags; throws UsageError naming a bad value. `isTty`: whether to draw the progress bar by default. */
export function benchOptionsFrom(values: BenchValues, isTty: boolean, env: NodeJS.ProcessEnv = process.env): BenchOptions {
    const options: BenchOptions = {
        demoModelSize: choiceValue("demo-size", values["demo-size"], demoModelSizeNames, "small"),
        numPrompts: integerValue("num-prompts", values["num-prompts"], 100, 1),
        numWarmups: integerValue("num-warmups", values["num-warmups"], 0, 0),
        inputLen: integerValue("input-len", values["input-len"], 64, 1),
        prefixLen: integerValue("prefix-len", values["prefix-len"], 0, 0),
        outputLen: integerValue("output-len", values["output-len"], 64, 1),
        rangeRatio: fractionValue("random-range-ratio", values["random-range-ratio"], 0),
        maxConcurrency: integerValue("max-concurrency", values["max-concurrency"], Infinity, 1),
        requestRate: positiveNumberValue("request-rate", values["request-rate"], Infinity, true),
        parallel: integerValue("parallel", values.parallel, 4, 1),
        prefixCache: prefixCacheValue(values["prefix-cache"]),
        tilePadding: tilePaddingValue(values["tile-padding"]),
        gpu: gpuValue(values.gpu),
        stats: choiceValue("stats", values.stats, ["on", "off"], "on") === "on",
        statsIntervalMs: integerValue("stats-interval-ms", values["stats-interval-ms"], 1000, 1),
        prometheusPort: portValue("prometheus-port", values["prometheus-port"], 0),
        mode: values["in-process"] === true ? "inProcess" : "process",
        seed: integerValue("seed", values.seed, 0, 0),
        progress: values["no-progress"] === true ? false : isTty
    };
    if (values.model !== undefined) options.modelPath = values.model;
    if (values.threads !== undefined) options.threads = integerValue("threads", values.threads, 1, 1);
    if (values["context-size"] !== undefined) options.contextSize = integerValue("context-size", values["context-size"], 4096, 1);
    const promptCacheMiB = promptCacheValue(values["prompt-cache"]);
    if (promptCacheMiB !== undefined) options.promptCacheMiB = promptCacheMiB;
    const prefillChunkTokens = prefillChunkValue(values["prefill-chunk"]);
    if (prefillChunkTokens !== undefined) options.prefillChunkTokens = prefillChunkTokens;
    const loraAdapters = loraAdaptersValue(values.lora, values["lora-scaled"]);
    if (loraAdapters !== undefined) options.loraAdapters = loraAdapters;
    if (values.json !== undefined) options.jsonPath = values.json;
    const baseUrl = values["base-url"];
    if (baseUrl === undefined) {
        const stray = httpFlags.find((name) => values[name] !== undefined);
        if (stray !== undefined)
            throw new UsageError(`--${stray} needs --base-url (it configures the HTTP target)`);
        return options;
    }
    if (values.model !== undefined)
        throw new UsageError("--model is a GGUF file for the local engine; with --base-url, name the server's model with --model-name");
    const engineFlag = engineFlags.find((name) => values[name] !== undefined);
    if (engineFlag !== undefined)
        throw new UsageError(`--${engineFlag} configures the local engine, which --base-url does not start`);
    try {
        normalizeBaseUrl(baseUrl);
    } catch (error) {
        throw new UsageError(`--base-url: ${errorMessage(error)}`);
    }
    const apiKey = values["api-key"] ?? env[openAiKeyEnvVar];
    options.http = {
        baseUrl,
        endpoint: choiceValue("endpoint", values.endpoint, benchEndpoints, "completions"),
        ...(apiKey !== undefined && apiKey !== "" ? {apiKey} : {}),
        ...(values["model-name"] !== undefined ? {modelName: values["model-name"]} : {}),
        ...(values["no-cache-prompt"] === true ? {cachePrompt: false} : {})
    };
    return options;
}

/** Parses bench flags (for scripts that run the benchmark); throws UsageError. */
export function parseBenchArgs(args: string[], isTty: boolean): BenchOptions {
    return benchOptionsFrom(parseCommandArgs(benchCommandLine, args).values, isTty);
}
