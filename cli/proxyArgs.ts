/** `inference-monitor proxy` flags, declared once for parsing and --help. */
import {type CliOptions, type CommandLine, type OptionValues, UsageError} from "./commandLine.js";
import {portValue, positiveNumberValue} from "./optionValues.js";

/** Where tools point instead of the upstream, and where its dashboard is: next to `serve` (8719) and `watch` (8720). */
export const defaultProxyPort = 8721;
export const defaultProxyMonitorPort = 8722;

export const proxyCommandLine = {
    name: "proxy",
    summary: "put a monitoring proxy in front of any OpenAI-compatible server or Ollama: every request measured, its dashboard and /metrics",
    options: {
        "upstream": {type: "string", placeholder: "URL", description: "the server to forward to, e.g. http://127.0.0.1:11434", required: true},
        "port": {type: "string", placeholder: "N", description: `port tools use instead of the upstream's (default ${defaultProxyPort}; 0 = a free one)`},
        "monitor-port": {type: "string", placeholder: "M", description: `dashboard and /metrics port (default ${defaultProxyMonitorPort}; 0 = a free one)`},
        "log-interval": {type: "string", placeholder: "S", description: "seconds between vLLM log lines (default 10; 0 = none)"}
    },
    details: "Point tools at http://127.0.0.1:PORT/v1 (or http://127.0.0.1:PORT for Ollama's /api). It listens on 127.0.0.1 only. Ctrl-C stops."
} satisfies CommandLine<CliOptions>;

export type ProxyOptions = {upstream: string, port: number, monitorPort: number, logIntervalS: number};

export function proxyOptionsFrom(values: OptionValues<typeof proxyCommandLine.options>): ProxyOptions {
    const upstream = values.upstream!;
    let parsed: URL;
    try {
        parsed = new URL(upstream);
    } catch {
        throw new UsageError(`--upstream ${JSON.stringify(upstream)} is not a URL (e.g. http://127.0.0.1:8080)`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
        throw new UsageError(`--upstream must be an http or https URL, got ${upstream}`);
    return {
        // The base without /v1: the proxy forwards the paths tools ask for.
        upstream: parsed.origin + parsed.pathname.replace(/\/v1\/?$/, "").replace(/\/+$/, ""),
        port: portValue("port", values.port, defaultProxyPort),
        monitorPort: portValue("monitor-port", values["monitor-port"], defaultProxyMonitorPort),
        logIntervalS: values["log-interval"] === "0" ? 0 : positiveNumberValue("log-interval", values["log-interval"], 10)
    };
}
