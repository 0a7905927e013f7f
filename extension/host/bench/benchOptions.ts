import {parseArgs} from "node:util";
import type {DemoModelSize} from "../../../engine/model/demoModel.js";
import type {EngineMode} from "../engineClient/engineClient.js";
import {errorMessage} from "../../../common/errorMessage.js";

/** `inference-monitor bench` options; flags mirror vLLM's `benchmark_serving.py`. */
export type BenchOptions = {
    /** GGUF file; default the built-in demo model of `demoModelSize`. */
    modelPath?: string,
    demoModelSize: DemoModelSize,
    numPrompts: number,
    inputLen: number,
    outputLen: number,
    /** Most requests in flight at once; Infinity = no limit. */
    maxConcurrency: number,
    /** Poisson arrival rate in requests/s; Infinity = send all at once. */
    requestRate: number,
    parallel: number,
    threads?: number,
    contextSize?: number,
    stats: boolean,
    statsIntervalMs: number,
    /** 0 = no Prometheus endpoint. */
    prometheusPort: number,
    mode: EngineMode,
    seed: number,
    jsonPath?: string,
    /** Print the progress bar (default: when stderr is a TTY). */
    progress: boolean
};

export class UsageError extends Error {
    override readonly name = "UsageError";
}

export const benchUsage = `Usage: inference-monitor bench [options]

  --model FILE            GGUF model (default: built-in demo model, --demo-size)
  --demo-size SIZE        tiny | small | medium (default small)
  --num-prompts N         requests to send (default 100)
  --input-len N           prompt length in tokens, approximately (default 64)
  --output-len N          tokens to generate per request, exactly (default 64)
  --max-concurrency N     most requests in flight (default: no limit)
  --request-rate R        Poisson arrivals per second (default inf: all at once)
  --parallel N            engine sequences evaluated together (default 4)
  --threads N             CPU threads (default: engine default)
  --context-size N        KV cache tokens (default 4096)
  --stats on|off          stats collection; off = no stats worker, StatsManager or loggers (default on)
  --stats-interval-ms N   stats snapshot interval (default 1000)
  --prometheus-port N     serve /metrics on 127.0.0.1:N (default 0 = off)
  --in-process            run the engine inside this process
  --seed N                sampling and arrival seed (default 0)
  --json FILE             write vLLM's result keys to FILE
  --no-progress           no progress bar
`;

function positiveInt(name: string, raw: string | undefined, fallback: number, min = 1): number {
    if (raw === undefined)
        return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min)
        throw new UsageError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`);
    return value;
}

function rate(name: string, raw: string | undefined): number {
    if (raw === undefined || raw === "inf")
        return Infinity;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0)
        throw new UsageError(`--${name} must be a positive number or "inf", got ${JSON.stringify(raw)}`);
    return value;
}

/** Parses bench flags; throws UsageError (exit code 2) on unknown flags or bad values. */
export function parseBenchArgs(args: string[], isTty: boolean): BenchOptions {
    let values;
    try {
        values = parseArgs({
            args,
            strict: true,
            allowPositionals: false,
            options: {
                "model": {type: "string"}, "demo-size": {type: "string"}, "num-prompts": {type: "string"},
                "input-len": {type: "string"}, "output-len": {type: "string"}, "max-concurrency": {type: "string"},
                "request-rate": {type: "string"}, "parallel": {type: "string"}, "threads": {type: "string"},
                "context-size": {type: "string"}, "stats": {type: "string"}, "stats-interval-ms": {type: "string"},
                "prometheus-port": {type: "string"}, "in-process": {type: "boolean"}, "seed": {type: "string"},
                "json": {type: "string"}, "no-progress": {type: "boolean"}
            }
        }).values;
    } catch (error) {
        throw new UsageError(errorMessage(error));
    }
    const size = values["demo-size"] ?? "small";
    if (size !== "tiny" && size !== "small" && size !== "medium")
        throw new UsageError(`--demo-size must be tiny, small or medium, got ${JSON.stringify(size)}`);
    const stats = values.stats ?? "on";
    if (stats !== "on" && stats !== "off")
        throw new UsageError(`--stats must be on or off, got ${JSON.stringify(stats)}`);
    const options: BenchOptions = {
        demoModelSize: size,
        numPrompts: positiveInt("num-prompts", values["num-prompts"], 100),
        inputLen: positiveInt("input-len", values["input-len"], 64),
        outputLen: positiveInt("output-len", values["output-len"], 64),
        maxConcurrency: values["max-concurrency"] === undefined ? Infinity : positiveInt("max-concurrency", values["max-concurrency"], 1),
        requestRate: rate("request-rate", values["request-rate"]),
        parallel: positiveInt("parallel", values.parallel, 4),
        stats: stats === "on",
        statsIntervalMs: positiveInt("stats-interval-ms", values["stats-interval-ms"], 1000),
        prometheusPort: positiveInt("prometheus-port", values["prometheus-port"], 0, 0),
        mode: values["in-process"] === true ? "inProcess" : "process",
        seed: positiveInt("seed", values.seed, 0, 0),
        progress: values["no-progress"] === true ? false : isTty
    };
    if (options.prometheusPort > 65535)
        throw new UsageError(`--prometheus-port must be <= 65535, got ${options.prometheusPort}`);
    if (values.model !== undefined) options.modelPath = values.model;
    if (values.threads !== undefined) options.threads = positiveInt("threads", values.threads, 1);
    if (values["context-size"] !== undefined) options.contextSize = positiveInt("context-size", values["context-size"], 4096);
    if (values.json !== undefined) options.jsonPath = values.json;
    return options;
}
