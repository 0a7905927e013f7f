/** `inference-monitor demo` flags, declared once for parsing and --help. */
import {type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {portValue, positiveNumberValue} from "./optionValues.js";
import {gpuFlag, gpuValue} from "./engineFlags.js";
import type {GpuSetting} from "../protocol/engineOptions.js";

export const demoCommandLine = {
    name: "demo",
    summary: "serve the live dashboard while driving a mixed workload",
    options: {
        "model": {type: "string", placeholder: "FILE", description: "GGUF model (default: the built-in demo model)"},
        "port": {type: "string", placeholder: "N", description: "dashboard port on 127.0.0.1 (default 0 = a free one)"},
        "duration": {type: "string", placeholder: "S", description: "seconds to run (default 60; Ctrl-C stops earlier)"},
        "rate": {type: "string", placeholder: "R", description: "request arrivals per second (default 3)"},
        "prometheus-port": {type: "string", placeholder: "N", description: "also serve /metrics (default 0 = off)"},
        "log-interval": {type: "string", placeholder: "S", description: "seconds between vLLM log lines (default 10)"},
        "gpu": gpuFlag,
        "in-process": {type: "boolean", description: "run the engine inside this process"}
    }
} satisfies CommandLine<CliOptions>;

export type DemoOptions = {
    modelPath?: string, port: number, durationS: number, rate: number, prometheusPort: number, logIntervalS: number,
    gpu: GpuSetting, inProcess: boolean
};

/** The demo options from parsed flags; throws UsageError naming a bad value. */
export function demoOptionsFrom(values: OptionValues<typeof demoCommandLine.options>): DemoOptions {
    return {
        port: portValue("port", values.port, 0),
        durationS: positiveNumberValue("duration", values.duration, 60),
        rate: positiveNumberValue("rate", values.rate, 3),
        prometheusPort: portValue("prometheus-port", values["prometheus-port"], 0),
        logIntervalS: positiveNumberValue("log-interval", values["log-interval"], 10),
        gpu: gpuValue(values.gpu),
        inProcess: values["in-process"] === true,
        ...(values.model !== undefined ? {modelPath: values.model} : {})
    };
}
