/**
 * The GPU self-test (engine/gpu/): the engine forks a probe process that loads node-llama-cpp with one
 * backend and runs a small model on it, because a backend whose kernels cannot run on this GPU and
 * driver aborts the whole process at its first evaluation (seen on an H200 with driver 580: CUDA 13.1
 * PTX that the driver cannot JIT). The request travels in the environment; the answer over Node IPC.
 */
import {ProtocolError, expectObject, expectOneOf, expectString} from "./validation.js";

/** Environment variable carrying the probe request (JSON). */
export const gpuProbeRequestEnv = "INFERENCE_MONITOR_GPU_PROBE";

/** A backend the probe can test: a GPU one, or "cpu" (tested so the probe itself runs on machines without a GPU). */
export const probedBackends = ["cuda", "vulkan", "metal", "cpu"] as const;
export type ProbedBackend = typeof probedBackends[number];

export type GpuProbeRequest = {backend: ProbedBackend, modelPath: string};

/** The probe's one message: the backend ran the model, or a JavaScript error stopped it (a crash sends nothing). */
export type GpuProbeResult = {type: "ok", devices: string[]} | {type: "error", message: string};

export function parseGpuProbeRequest(json: string): GpuProbeRequest {
    let value: unknown;
    try {
        value = JSON.parse(json);
    } catch {
        throw new ProtocolError(`${gpuProbeRequestEnv} is not valid JSON`);
    }
    const obj = expectObject(value, "GPU probe request");
    return {backend: expectOneOf(obj, "backend", probedBackends, "GPU probe request"), modelPath: expectString(obj, "modelPath", "GPU probe request")};
}

export function parseGpuProbeResult(value: unknown): GpuProbeResult {
    const obj = expectObject(value, "GPU probe result");
    const type = expectOneOf(obj, "type", ["ok", "error"], "GPU probe result");
    if (type === "error")
        return {type, message: expectString(obj, "message", "GPU probe result", 4096)};
    const devices = obj.devices;
    if (!Array.isArray(devices) || devices.length > 64 || !devices.every((name) => typeof name === "string"))
        throw new ProtocolError("GPU probe result.devices: expected at most 64 strings");
    return {type, devices: devices as string[]};
}

