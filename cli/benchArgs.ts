/** `inference-monitor bench` flags (they mirror vLLM's `benchmark_serving.py`), declared once for parsing and --help. */
import type {BenchOptions} from "../extension/host/bench/benchOptions.js";
import {demoModelSizes, type DemoModelSize} from "../engine/model/demoModel.js";
import {parseCommandArgs, type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {choiceValue, integerValue, portValue, positiveNumberValue} from "./optionValues.js";

const demoSizes = Object.keys(demoModelSizes) as DemoModelSize[];

export const benchCommandLine = {
    name: "bench",
    summary: "vLLM-style serving benchmark on the engine",
    options: {
        "model": {type: "string", placeholder: "FILE", description: "GGUF model (default: built-in demo model, --demo-size)"},
        "demo-size": {type: "string", placeholder: "SIZE", description: "tiny | small | medium (default small)"},
        "num-prompts": {type: "string", placeholder: "N", description: "requests to send (default 100)"},
        "input-len": {type: "string", placeholder: "N", description: "prompt length in tokens, approximately (default 64)"},
        "output-len": {type: "string", placeholder: "N", description: "tokens to generate per request, exactly (default 64)"},
        "max-concurrency": {type: "string", placeholder: "N", description: "most requests in flight (default: no limit)"},
        "request-rate": {type: "string", placeholder: "R", description: "Poisson arrivals per second (default inf: all at once)"},
        "parallel": {type: "string", placeholder: "N", description: "engine sequences evaluated together (default 4)"},
        "threads": {type: "string", placeholder: "N", description: "CPU threads (default: engine default)"},
        "context-size": {type: "string", placeholder: "N", description: "KV cache tokens (default 4096)"},
        "stats": {type: "string", placeholder: "on|off",
            description: "stats collection; off = no stats worker, StatsManager or loggers (default on)"},
        "stats-interval-ms": {type: "string", placeholder: "N", description: "stats snapshot interval (default 1000)"},
        "prometheus-port": {type: "string", placeholder: "N", description: "serve /metrics on 127.0.0.1:N (default 0 = off)"},
        "in-process": {type: "boolean", description: "run the engine inside this process"},
        "seed": {type: "string", placeholder: "N", description: "sampling and arrival seed (default 0)"},
        "json": {type: "string", placeholder: "FILE", description: "write vLLM's result keys to FILE"},
        "no-progress": {type: "boolean", description: "no progress bar"}
    }
} satisfies CommandLine<CliOptions>;

type BenchValues = OptionValues<typeof benchCommandLine.options>;

/** The bench options from parsed flags; throws UsageError naming a bad value. `isTty`: whether to draw the progress bar by default. */
export function benchOptionsFrom(values: BenchValues, isTty: boolean): BenchOptions {
    const options: BenchOptions = {
        demoModelSize: choiceValue("demo-size", values["demo-size"], demoSizes, "small"),
        numPrompts: integerValue("num-prompts", values["num-prompts"], 100, 1),
        inputLen: integerValue("input-len", values["input-len"], 64, 1),
        outputLen: integerValue("output-len", values["output-len"], 64, 1),
        maxConcurrency: integerValue("max-concurrency", values["max-concurrency"], Infinity, 1),
        requestRate: positiveNumberValue("request-rate", values["request-rate"], Infinity, true),
        parallel: integerValue("parallel", values.parallel, 4, 1),
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
    if (values.json !== undefined) options.jsonPath = values.json;
    return options;
}

/** Parses bench flags (for scripts that run the benchmark); throws UsageError. */
export function parseBenchArgs(args: string[], isTty: boolean): BenchOptions {
    return benchOptionsFrom(parseCommandArgs(benchCommandLine, args).values, isTty);
}
