/** `inference-monitor serve` flags, declared once for parsing and --help. */
import {defaultApiPort, defaultMaxWaiting} from "../extension/host/openai/apiServer.js";
import {defaultSsePingIntervalS} from "../extension/host/net/eventStream.js";
import {parseApiKey, type ApiKey} from "../extension/host/openai/apiKeys.js";
import {type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {
    gpuFlag, gpuValue, loraAdaptersValue, loraFlag, loraInitWithoutApplyFlag, loraScaledFlag, prefillChunkFlag, prefillChunkValue,
    prefixCacheFlag, prefixCacheValue, promptCacheFlag, promptCacheValue, tilePaddingFlag, tilePaddingValue
} from "./engineFlags.js";
import type {GpuSetting} from "../protocol/engineOptions.js";
import type {LoraAdapter} from "../protocol/loraAdapters.js";
import {directoryValue, integerValue, portValue, positiveNumberValue} from "./optionValues.js";

/** Read when --api-key is absent, so a key need not appear in the process list. */
export const apiKeyEnvVar = "INFERENCE_MONITOR_API_KEY";

export const serveCommandLine = {
    name: "serve",
    summary: "serve the model over an OpenAI-compatible API, with /metrics and the live dashboard on the same port",
    options: {
        "model": {type: "string", placeholder: "FILE", description: "GGUF model (default: the built-in demo model)"},
        "port": {type: "string", placeholder: "N", description: `port (default ${defaultApiPort}; 0 = a free one)`},
        "host": {type: "string", placeholder: "ADDR", description: "address to bind (default 127.0.0.1; anything else needs an API key)"},
        "api-key": {type: "string", placeholder: "KEY", description: `require Authorization: Bearer KEY on /v1 (or NAME=KEY, comma-separated for several; the name labels its requests; default $${apiKeyEnvVar})`},
        "parallel": {type: "string", placeholder: "N", description: "sequences evaluated together (default 4)"},
        "threads": {type: "string", placeholder: "N", description: "CPU threads (default: the math cores; half of them, at least 1, for a model under 50 M parameters)"},
        "context-size": {type: "string", placeholder: "N", description: "KV cache in tokens, shared by the sequences (default 4096)"},
        "prefix-cache": prefixCacheFlag,
        "prompt-cache": promptCacheFlag,
        "prefill-chunk": prefillChunkFlag,
        "tile-padding": tilePaddingFlag,
        "gpu": gpuFlag,
        "lora": loraFlag,
        "lora-scaled": loraScaledFlag,
        "lora-init-without-apply": loraInitWithoutApplyFlag,
        "max-waiting": {type: "string", placeholder: "N", description: `requests waiting for a sequence before new ones get 503 (default ${defaultMaxWaiting})`},
        "log-interval": {type: "string", placeholder: "S", description: "seconds between vLLM log lines (default 10)"},
        "sse-ping-interval": {type: "string", placeholder: "S", description: `seconds a stream may stay silent (waiting, evaluating a long prompt) before a keep-alive comment; -1 = never (default ${defaultSsePingIntervalS})`},
        "slot-save-path": {type: "string", placeholder: "DIR", description: "directory for llama.cpp's slot save and restore (POST /slots/N?action=save|restore|erase); an existing directory (default: no slot actions, 501)"},
        "in-process": {type: "boolean", description: "run the engine inside this process"}
    },
    details: "Configure tools with base URL http://127.0.0.1:PORT/v1 (any API key unless --api-key is set). Ctrl-C stops."
} satisfies CommandLine<CliOptions>;

export type ServeOptions = {
    modelPath?: string, port: number, host: string, apiKeys: ApiKey[], parallel?: number, threads?: number, contextSize?: number,
    prefixCache: boolean, tilePadding: boolean, promptCacheMiB?: number, prefillChunkTokens?: number, gpu: GpuSetting, maxWaiting: number,
    logIntervalS: number, ssePingIntervalS: number, inProcess: boolean, slotSavePath?: string, loraAdapters?: LoraAdapter[]
};

/** The serve options from parsed flags (and the environment); throws UsageError naming a bad value. */
export function serveOptionsFrom(values: OptionValues<typeof serveCommandLine.options>,
                                 env: NodeJS.ProcessEnv = process.env): ServeOptions {
    const keys = values["api-key"] ?? env[apiKeyEnvVar];
    const options: ServeOptions = {
        port: portValue("port", values.port, defaultApiPort),
        host: values.host ?? "127.0.0.1",
        apiKeys: keys === undefined || keys === "" ? [] : keys.split(",").map((key) => parseApiKey(key.trim())),
        prefixCache: prefixCacheValue(values["prefix-cache"]),
        tilePadding: tilePaddingValue(values["tile-padding"]),
        gpu: gpuValue(values.gpu),
        maxWaiting: integerValue("max-waiting", values["max-waiting"], defaultMaxWaiting, 0),
        logIntervalS: positiveNumberValue("log-interval", values["log-interval"], 10),
        ssePingIntervalS: integerValue("sse-ping-interval", values["sse-ping-interval"], defaultSsePingIntervalS, -1, 2 ** 31 - 1),
        inProcess: values["in-process"] === true
    };
    if (values.model !== undefined) options.modelPath = values.model;
    if (values.parallel !== undefined) options.parallel = integerValue("parallel", values.parallel, 4, 1, 256);
    if (values.threads !== undefined) options.threads = integerValue("threads", values.threads, 1, 1, 1024);
    const promptCacheMiB = promptCacheValue(values["prompt-cache"]);
    if (promptCacheMiB !== undefined) options.promptCacheMiB = promptCacheMiB;
    const prefillChunkTokens = prefillChunkValue(values["prefill-chunk"]);
    if (prefillChunkTokens !== undefined) options.prefillChunkTokens = prefillChunkTokens;
    if (values["context-size"] !== undefined) options.contextSize = integerValue("context-size", values["context-size"], 4096, 16, 1 << 22);
    const loraAdapters = loraAdaptersValue(values.lora, values["lora-scaled"], values["lora-init-without-apply"] === true);
    if (loraAdapters !== undefined) options.loraAdapters = loraAdapters;
    if (values["slot-save-path"] !== undefined) options.slotSavePath = directoryValue("slot-save-path", values["slot-save-path"]);
    return options;
}
