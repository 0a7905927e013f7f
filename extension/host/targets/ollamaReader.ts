/**
 * Ollama: `/api/version` and `/api/ps` (the loaded models, their size, how much of it is in VRAM,
 * context length, when they unload). Ollama has no metrics endpoint: request counts, tokens and
 * latencies come only from watching its traffic through `inference-monitor proxy`.
 */
import {isObject} from "../../../protocol/validation.js";
import {targetGetJson, TargetReadError, type TargetGetOptions} from "./targetHttp.js";
import type {TargetReading} from "./targetReading.js";

export type OllamaLoadedModel = {
    name: string, sizeBytes: number, vramBytes: number, contextLength: number | undefined, expiresAt: string | undefined
};

export async function readOllama(baseUrl: string, http: TargetGetOptions): Promise<TargetReading> {
    const [version, ps] = await Promise.all([targetGetJson(`${baseUrl}/api/version`, http), targetGetJson(`${baseUrl}/api/ps`, http)]);
    return ollamaReading(version, ps);
}

export function ollamaReading(version: unknown, ps: unknown): TargetReading {
    if (!isObject(version) || typeof version.version !== "string")
        throw new TargetReadError("/api/version has no version; not an Ollama server?", "bad");
    const models = parseLoadedModels(ps);
    const reading: TargetReading = {
        kind: "ollama",
        model: models.length === 0 ? undefined : models.map((model) => model.name).join(", "),
        version: version.version,
        vramUsedBytes: models.reduce((sum, model) => sum + model.vramBytes, 0),
        histograms: {},
        notes: [
            "Ollama exports no request counters or latencies: put `inference-monitor proxy --upstream` in front of it for those",
            models.length === 0 ? "no model loaded" : models.map((model) =>
                `${model.name}: ${(model.sizeBytes / 2 ** 30).toFixed(2)} GiB, ${model.sizeBytes > 0 ? Math.round(100 * model.vramBytes / model.sizeBytes) : 0}% in VRAM` +
                `${model.contextLength !== undefined ? `, context ${model.contextLength}` : ""}${model.expiresAt !== undefined ? `, unloads at ${model.expiresAt}` : ""}`).join("; ")
        ]
    };
    const contexts = models.map((model) => model.contextLength).filter((n): n is number => n !== undefined);
    if (contexts.length > 0)
        reading.contextSize = Math.max(...contexts);
    return reading;
}

export function parseLoadedModels(ps: unknown): OllamaLoadedModel[] {
    if (!isObject(ps) || !Array.isArray(ps.models))
        throw new TargetReadError("/api/ps has no models list", "bad");
    return ps.models.map((value: unknown, i) => {
        if (!isObject(value) || typeof value.name !== "string" || typeof value.size !== "number")
            throw new TargetReadError(`/api/ps models[${i}] has no name / size`, "bad");
        return {
            name: value.name,
            sizeBytes: value.size,
            vramBytes: typeof value.size_vram === "number" ? value.size_vram : 0,
            contextLength: typeof value.context_length === "number" ? value.context_length : undefined,
            expiresAt: typeof value.expires_at === "string" ? value.expires_at : undefined
        };
    });
}
