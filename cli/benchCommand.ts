import fs from "node:fs";
import {formatLoraAdapters, formatPrefixCache} from "../common/format.js";
import {BenchWorkloadError, runBenchmark, runHttpBenchmark, type BenchIo} from "../extension/host/bench/runBenchmark.js";
import {formatBenchTable} from "../extension/host/bench/benchMetrics.js";
import type {BenchOptions} from "../extension/host/bench/benchOptions.js";
import {BenchTargetError, type HttpTargetOptions} from "../extension/host/bench/openaiHttpTarget.js";
import {EngineLoadError} from "../extension/host/engineClient/engineClient.js";
import {PortInUseError} from "../extension/host/net/listen.js";
import {servedModelId} from "../extension/host/servedModelId.js";
import {benchCommandLine, benchOptionsFrom} from "./benchArgs.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {serverStartFailure} from "./serverStartFailure.js";
import {warnGpuFallbacks} from "./gpuFallbackWarnings.js";

/**
 * `inference-monitor bench`: exit 0 on success, 1 on engine/model failure, any failed request (its
 * errors printed) or disagreeing stats (with --base-url: an unusable server), 2 on usage errors (a
 * workload that cannot fit the context included).
 */
export async function benchCommand(args: string[], io: CliIo, createStatsSession: BenchIo["createStatsSession"]): Promise<number> {
    const commandLine = readCommandLine(benchCommandLine, args, io, (values) => benchOptionsFrom(values, io.isTty));
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    if (options.http !== undefined)
        return await benchHttp(options, options.http, io);
    try {
        const run = await runBenchmark(options, {stderr: io.stderr, createStatsSession});
        io.stdout(`${formatBenchTable(run.metrics, run.clientQueue)}\n`);
        warnGpuFallbacks(run.info, io);
        io.stdout(`Engine: ${run.info.backend.toUpperCase()}${run.info.gpuDevices.length > 0 ? ` (${run.info.gpuDevices.join(", ")})` : ""} · ${run.info.model.name} · mode ${options.mode} · stats ${options.stats ? "on" : "off"} · ` +
            `prefix cache ${formatPrefixCache(run.info)} · prefill chunk ${run.info.prefillChunkTokens} tokens` +
            `${run.info.loraAdapters.length > 0 ? ` · LoRA ${formatLoraAdapters(run.info.loraAdapters)}` : ""}\n`);
        if (run.statsAgreement !== undefined)
            io.stdout(`${run.statsAgreement.detail}\n`);
        if (options.jsonPath !== undefined) {
            const json = {
                ...run.metrics,
                ...run.clientQueue,
                stats: options.stats ? "on" : "off",
                mode: options.mode === "inProcess" ? "in-process" : "process",
                prefix_cache: run.info.prefixCache ? "on" : "off",
                prompt_cache_mib: run.info.promptCacheMiB,
                prefill_chunk_tokens: run.info.prefillChunkTokens,
                // The served model id, as the HTTP target's (its /v1/models id) and vLLM's `model_id`.
                model_name: servedModelId(run.info),
                model_path: run.info.model.path,
                backend: run.info.backend,
                num_prompts: options.numPrompts,
                num_warmups: options.numWarmups,
                input_len: options.inputLen,
                prefix_len: options.prefixLen,
                output_len: options.outputLen,
                random_range_ratio: options.rangeRatio,
                max_concurrency: Number.isFinite(options.maxConcurrency) ? options.maxConcurrency : null,
                request_rate: Number.isFinite(options.requestRate) ? options.requestRate : "inf",
                parallel: run.info.parallel,
                threads: run.info.threads,
                stats_agree: run.statsAgreement?.ok ?? null
            };
            fs.writeFileSync(options.jsonPath, JSON.stringify(json, null, 2) + "\n");
        }
        const failed = printFailures(run.results.flatMap((r) => r.reason === "error" ? [r.error ?? "error"] : []), run.results.length, io);
        return run.statsAgreement?.ok === false || failed ? 1 : 0;
    } catch (error) {
        if (error instanceof BenchWorkloadError) {
            io.stderr(`${error.message}\n`);
            return 2;
        }
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

/** `bench --base-url`: the same workload, table and JSON against an OpenAI-compatible server. */
async function benchHttp(options: BenchOptions, http: HttpTargetOptions, io: CliIo): Promise<number> {
    let run;
    try {
        run = await runHttpBenchmark(options, http, {stderr: io.stderr});
    } catch (error) {
        if (error instanceof BenchTargetError) {
            io.stderr(`Could not benchmark ${http.baseUrl}: ${error.message}\n`);
            return 1;
        }
        throw error;
    }
    const {metrics, clientQueue, results, target} = run;
    io.stdout(`${formatBenchTable(metrics, clientQueue)}\n`);
    io.stdout(`Server: ${target.endpointUrl} · model ${target.model}\n`);
    const withoutUsage = results.filter((r) => (r.reason === "stop" || r.reason === "length") && !r.usage).length;
    if (withoutUsage > 0)
        io.stdout(`${withoutUsage} responses carried no usage: their output tokens are counted as text chunks, their input tokens as 0\n`);
    const errors = results.flatMap((r) => r.error !== undefined ? [r.error] : []);
    printFailures(errors, results.length, io);
    if (target.resentRequests > 0)
        io.stderr(`${target.resentRequests} request(s) sent again: the server had closed their kept-alive connection\n`);
    if (options.jsonPath !== undefined) {
        const json = {
            ...metrics,
            ...clientQueue,
            base_url: target.baseUrl,
            endpoint: target.endpoint,
            resent_requests: target.resentRequests,
            cache_prompt: http.cachePrompt ?? null,
            model_name: target.model,
            num_prompts: options.numPrompts,
            num_warmups: options.numWarmups,
            input_len: options.inputLen,
            prefix_len: options.prefixLen,
            output_len: options.outputLen,
            random_range_ratio: options.rangeRatio,
            max_concurrency: Number.isFinite(options.maxConcurrency) ? options.maxConcurrency : null,
            request_rate: Number.isFinite(options.requestRate) ? options.requestRate : "inf",
            errors
        };
        fs.writeFileSync(options.jsonPath, JSON.stringify(json, null, 2) + "\n");
    }
    return errors.length > 0 ? 1 : 0;
}

/** "N of M requests failed:" and the most common reasons, on stderr; whether any failed. */
function printFailures(errors: readonly string[], total: number, io: CliIo): boolean {
    if (errors.length === 0)
        return false;
    const counts = new Map<string, number>();
    for (const error of errors)
        counts.set(error, (counts.get(error) ?? 0) + 1);
    io.stderr(`${errors.length} of ${total} requests failed:\n`);
    for (const [message, count] of [...counts].slice(0, 5))
        io.stderr(`  ${count}× ${message}\n`);
    if (counts.size > 5)
        io.stderr(`  … and ${counts.size - 5} other errors\n`);
    return true;
}
