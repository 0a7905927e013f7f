import fs from "node:fs";
import {runBenchmark, type BenchIo} from "../extension/host/bench/runBenchmark.js";
import {formatBenchTable} from "../extension/host/bench/benchMetrics.js";
import {EngineLoadError} from "../extension/host/engineClient/engineClient.js";
import {PortInUseError} from "../extension/host/net/listen.js";
import {benchCommandLine, benchOptionsFrom} from "./benchArgs.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {serverStartFailure} from "./serverStartFailure.js";

/** `inference-monitor bench`: exit 0 on success, 1 on engine/model failure or disagreeing stats, 2 on usage errors. */
export async function benchCommand(args: string[], io: CliIo, createStatsSession: BenchIo["createStatsSession"]): Promise<number> {
    const commandLine = readCommandLine(benchCommandLine, args, io, (values) => benchOptionsFrom(values, io.isTty));
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    try {
        const run = await runBenchmark(options, {stderr: io.stderr, createStatsSession});
        io.stdout(`${formatBenchTable(run.metrics)}\n`);
        io.stdout(`Engine: ${run.info.backend.toUpperCase()} · ${run.info.model.name} · mode ${options.mode} · stats ${options.stats ? "on" : "off"}\n`);
        if (run.statsAgreement !== undefined)
            io.stdout(`${run.statsAgreement.detail}\n`);
        if (options.jsonPath !== undefined) {
            const json = {
                ...run.metrics,
                stats: options.stats ? "on" : "off",
                mode: options.mode === "inProcess" ? "in-process" : "process",
                model_name: run.info.model.name,
                model_path: run.info.model.path,
                backend: run.info.backend,
                num_prompts: options.numPrompts,
                input_len: options.inputLen,
                output_len: options.outputLen,
                max_concurrency: Number.isFinite(options.maxConcurrency) ? options.maxConcurrency : null,
                request_rate: Number.isFinite(options.requestRate) ? options.requestRate : "inf",
                parallel: run.info.parallel,
                threads: run.info.threads,
                stats_agree: run.statsAgreement?.ok ?? null
            };
            fs.writeFileSync(options.jsonPath, JSON.stringify(json, null, 2) + "\n");
        }
        return run.statsAgreement?.ok === false ? 1 : 0;
    } catch (error) {
        if (error instanceof EngineLoadError) {
            io.stderr(`Could not start the engine: ${error.message}\n`);
            return 1;
        }
        if (error instanceof PortInUseError) {
            io.stderr(`${serverStartFailure(error, "--prometheus-port", "none")}\n`);
            return 1;
        }
        throw error;
    }
}
