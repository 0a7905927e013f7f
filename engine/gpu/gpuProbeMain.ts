/**
 * GPU probe process entry (bundled as dist/gpuProbe.js; forked by engine/gpu/gpuSelfTest.ts): loads
 * node-llama-cpp with the requested backend, puts a small model on it, prefills a prompt and decodes a
 * few tokens, then reports "ok" over IPC. A backend that cannot run here either throws (reported as
 * "error") or aborts this process, which the parent reads as a crash; it never takes the engine down.
 */
import {parseGpuProbeRequest, gpuProbeRequestEnv, type GpuProbeResult} from "../../protocol/gpuProbeMessages.js";
import {importNodeLlamaCpp} from "../llamaTypes.js";
import {errorMessage} from "../../common/errorMessage.js";

/** Prompt tokens evaluated in one batch, then tokens decoded one by one: both paths of the kernels the engine uses. */
const probeText = "Once upon a time, a little robot checked that every kernel of its new GPU could really run.";
const decodeTokens = 4;

function send(result: GpuProbeResult): Promise<void> {
    return new Promise((resolve) => process.send === undefined ? resolve() : process.send(result, () => resolve()));
}

async function probe(): Promise<GpuProbeResult> {
    const request = parseGpuProbeRequest(process.env[gpuProbeRequestEnv] ?? "");
    const {getLlama, LlamaLogLevel} = await importNodeLlamaCpp();
    // debug: llama.cpp logs straight to stderr from native code. Through node-llama-cpp's logger the line
    // that says why (e.g. "CUDA error: the provided PTX was compiled with an unsupported toolchain.")
    // is queued for the JS thread and lost when ggml aborts the process a moment later (seen on an H200).
    const llama = await getLlama({gpu: request.backend === "cpu" ? false : request.backend, build: "never", logLevel: LlamaLogLevel.error,
        progressLogs: false, debug: true});
    if ((llama.gpu === false ? "cpu" : llama.gpu) !== request.backend)
        return {type: "error", message: `node-llama-cpp loaded ${llama.gpu === false ? "the CPU" : llama.gpu} backend instead`};
    const model = await llama.loadModel({modelPath: request.modelPath});
    const context = await model.createContext({contextSize: 256, sequences: 1});
    const sequence = context.getSequence();
    let decoded = 0;
    for await (const token of sequence.evaluate(model.tokenize(probeText), {temperature: 0})) {
        void token;
        if (++decoded >= decodeTokens)
            break;
    }
    const devices = request.backend === "cpu" ? [] : await llama.getGpuDeviceNames();
    await context.dispose();
    await model.dispose();
    return {type: "ok", devices};
}

/** node-llama-cpp's NoBinaryFoundError says only its own name. */
async function describeError(error: unknown): Promise<string> {
    const {NoBinaryFoundError} = await importNodeLlamaCpp();
    if (error instanceof NoBinaryFoundError)
        return "node-llama-cpp has no prebuilt binary for it that loads on this machine";
    return errorMessage(error);
}

void probe()
    .catch(async (error: unknown): Promise<GpuProbeResult> => ({type: "error", message: await describeError(error)}))
    .then(send)
    .finally(() => process.exit(0));
