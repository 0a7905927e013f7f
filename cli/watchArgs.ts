/** `inference-monitor watch` flags, declared once for parsing and --help. */
import {targetKinds, type TargetKind} from "../protocol/targetView.js";
import {type CliOptions, type CommandLine, type OptionValues, UsageError} from "./commandLine.js";
import {choiceValue, integerValue, portValue, positiveNumberValue} from "./optionValues.js";

/** The dashboard's default port for `watch`: next to `serve`'s 8719, clear of Ollama, llama.cpp, LM Studio and vLLM. */
export const defaultWatchPort = 8720;
/** Read when --api-key is absent. */
export const watchApiKeyEnvVar = "INFERENCE_MONITOR_TARGET_API_KEY";

export const watchCommandLine = {
    name: "watch",
    summary: "watch running servers (llama.cpp's server, vLLM replicas, Ollama): the live dashboard and /metrics for them",
    positionals: {placeholder: "URL…", min: 1},
    options: {
        "kind": {type: "string", placeholder: "KIND", description: `auto (default), ${targetKinds.join(", ")}`},
        "port": {type: "string", placeholder: "M", description: `dashboard and /metrics port (default ${defaultWatchPort}; 0 = a free one)`},
        "interval-ms": {type: "string", placeholder: "MS", description: "poll every MS milliseconds (default 1000)"},
        "api-key": {type: "string", placeholder: "KEY", description: `bearer token for the servers (default $${watchApiKeyEnvVar})`},
        "log-interval": {type: "string", placeholder: "S", description: "seconds between vLLM log lines (default 10; 0 = none)"}
    },
    details: "Several URLs of one kind are replicas: the dashboard merges them (counters summed, histograms merged bucket-wise) " +
        "and lists each. Ctrl-C stops."
} satisfies CommandLine<CliOptions>;

export type WatchOptions = {urls: string[], kind: TargetKind | "auto", port: number, intervalMs: number, apiKey?: string, logIntervalS: number};

export function watchOptionsFrom(values: OptionValues<typeof watchCommandLine.options>, urls: string[],
                                 env: NodeJS.ProcessEnv = process.env): WatchOptions {
    for (const url of urls) {
        let parsed: URL;
        try {
            parsed = new URL(url);
        } catch {
            throw new UsageError(`${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:8080)`);
        }
        if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
            throw new UsageError(`${url}: only http and https servers can be watched`);
    }
    const apiKey = values["api-key"] ?? env[watchApiKeyEnvVar];
    return {
        urls,
        kind: choiceValue("kind", values.kind, ["auto", ...targetKinds], "auto"),
        port: portValue("port", values.port, defaultWatchPort),
        intervalMs: integerValue("interval-ms", values["interval-ms"], 1000, 100, 3_600_000),
        ...(apiKey !== undefined && apiKey !== "" ? {apiKey} : {}),
        logIntervalS: values["log-interval"] === "0" ? 0 : positiveNumberValue("log-interval", values["log-interval"], 10)
    };
}
