import os from "node:os";
import path from "node:path";
import {warnGpuFallbacks} from "./gpuFallbackWarnings.js";
import {errorMessage} from "../common/errorMessage.js";
import {EngineClient} from "../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../extension/host/openai/apiServer.js";
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine} from "./commandLine.js";
import {serveCommandLine, serveOptionsFrom} from "./serveArgs.js";
import {serverStartFailure} from "./serverStartFailure.js";
import {dropOptimizingCompilers} from "./v8Compilers.js";
import {formatCount, formatLoraAdapters, formatPrefixCache} from "../common/format.js";
import {defaultThreads} from "../protocol/engineOptions.js";

/**
 * `inference-monitor serve`: the engine behind an OpenAI-compatible API, with `/metrics` and the live
 * dashboard on the same port, until Ctrl-C. The port is bound before the model loads, so a busy port
 * fails at once; `/health` answers 503 until the model is ready.
 */
export async function serveCommand(args: string[], io: CliIo): Promise<number> {
    const commandLine = readCommandLine(serveCommandLine, args, io, (values) => serveOptionsFrom(values));
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {options} = commandLine;
    if (dropOptimizingCompilers(options.threads)) {
        const cores = os.availableParallelism();
        io.stderr(`note: V8's optimizing compilers are off in this process and the engine's (${formatCount(cores, "core")} for ` +
            `${formatCount(options.threads ?? defaultThreads(cores), "compute thread")}): their background compiles would delay the engine's tokens\n`);
    }
    const pipeline = await StatsPipeline.create({writeLogLine: (line) => io.stderr(`${line}\n`), logIntervalS: options.logIntervalS});
    const client = new EngineClient({
        mode: options.inProcess ? "inProcess" : "process",
        prefixCache: options.prefixCache,
        tilePadding: options.tilePadding,
        gpu: options.gpu,
        maxWaitingRequests: options.maxWaiting,
        ...(options.modelPath !== undefined ? {modelPath: options.modelPath} : {}),
        ...(options.parallel !== undefined ? {parallel: options.parallel} : {}),
        ...(options.threads !== undefined ? {threads: options.threads} : {}),
        ...(options.contextSize !== undefined ? {contextSize: options.contextSize} : {}),
        ...(options.prefillChunkTokens !== undefined ? {prefillChunkTokens: options.prefillChunkTokens} : {}),
        ...(options.promptCacheMiB !== undefined ? {promptCacheMiB: options.promptCacheMiB} : {}),
        ...(options.loraAdapters !== undefined ? {loraAdapters: options.loraAdapters} : {})
    });
    pipeline.attach(client);
    let readyAt: number | undefined;
    let server: ApiServer;
    try {
        server = await ApiServer.listen({
            engine: {current: () => client}, port: options.port, host: options.host, apiKeys: options.apiKeys,
            maxWaiting: options.maxWaiting, ssePingIntervalS: options.ssePingIntervalS,
            metrics: await pipeline.mountMetrics(),
            onIgnoredField: (message) => io.stderr(`note: ${message}\n`),
            ...(options.slotSavePath !== undefined ? {slotSavePath: options.slotSavePath} : {}),
            dashboard: {source: pipeline.manager, webviewDir: path.join(__dirname, "webview"), engineStartedAt: () => readyAt, title: "Inference Monitor · serve"}
        });
    } catch (error) {
        await pipeline.dispose();
        io.stderr(`${serverStartFailure(error, "--port", "a free one")}\n`);
        return 1;
    }
    io.stdout(`OpenAI-compatible API: ${server.baseUrl}${options.apiKeys.length > 0 ? " (API key required)" : ""}\n`);
    io.stdout(`Dashboard: ${server.dashboardUrl ?? server.url}   Metrics: ${server.url}metrics\n`);
    io.stdout(`Loading ${options.modelPath ?? "the built-in demo model"}…\n`);
    try {
        const info = await client.start();
        readyAt = Date.now();
        warnGpuFallbacks(info, io);
        io.stdout(`Ready: ${info.model.name}, ${info.backend.toUpperCase()}, context ${info.contextSize}, ${formatCount(info.parallel, "sequence")}, ${formatCount(info.threads, "thread")}, ` +
            `prefix cache ${formatPrefixCache(info)}, prefill chunk ${info.prefillChunkTokens} tokens` +
            `${info.loraAdapters.length > 0 ? `, LoRA ${formatLoraAdapters(info.loraAdapters)}` : ""}. Ctrl-C stops.\n`);
    } catch (error) {
        io.stderr(`Could not start the engine: ${errorMessage(error)}\n`);
        await server.close();
        await pipeline.dispose();
        return 1;
    }
    await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
    });
    io.stdout("Stopping…\n");
    await client.stop();
    await server.close();
    await pipeline.dispose();
    return 0;
}
