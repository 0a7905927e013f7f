/**
 * The loaded model as Ollama's API describes a model (`/api/tags`, `/api/ps`, `/api/show`): what Copilot Chat's Ollama
 * models, Open WebUI and the `ollama` libraries read to list it, size its context and know whether it takes tools.
 * Its name is the file's (as `/v1/models` gives it) with Ollama's default tag, `:latest`; its digest is a SHA-256 of
 * the file's path and size (stable across restarts; hashing gigabytes of weights for an identifier is not worth it).
 */
import {createHash} from "node:crypto";
import {stat} from "node:fs/promises";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import type {OllamaModelDetails, OllamaModelEntry, OllamaShowResponse} from "../../../protocol/ollamaApi.js";

/** A FIM model's prompt for `/api/generate` in Ollama's template language (a description: the engine renders it). */
const fimTemplate = "{{ if .Suffix }}(FIM prefix token){{ .Prompt }}(FIM suffix token){{ .Suffix }}(FIM middle token){{ else }}{{ .Prompt }}{{ end }}";

/** Ollama's name for the model: `id:latest`. */
export function ollamaModelName(modelId: string): string {
    return `${modelId}:latest`;
}

/** A parameter count as Ollama writes it: "8.0B", "20.5M", "980K". */
export function parameterSize(count: number): string {
    if (count >= 1e9) return `${(count / 1e9).toFixed(1)}B`;
    if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M`;
    return `${Math.max(1, Math.round(count / 1e3))}K`;
}

function details(info: EngineInfo): OllamaModelDetails {
    const family = info.model.architecture;
    return {parent_model: "", format: "gguf", family, families: [family], parameter_size: parameterSize(info.model.parameterCount),
        quantization_level: info.model.quantization};
}

async function modifiedAt(info: EngineInfo): Promise<string> {
    try {
        return (await stat(info.model.path)).mtime.toISOString();
    } catch {
        return new Date(Date.now() - info.loadMs).toISOString();
    }
}

/** The model's `/api/tags` entry. */
export async function ollamaTagsEntry(info: EngineInfo, modelId: string): Promise<OllamaModelEntry> {
    const name = ollamaModelName(modelId);
    return {name, model: name, modified_at: await modifiedAt(info), size: info.model.sizeBytes,
        digest: createHash("sha256").update(`${info.model.path}\0${info.model.sizeBytes}`).digest("hex"), details: details(info)};
}

/** The model's `/api/ps` entry: loaded until the server stops (Ollama's keep-alive "forever" reads as a far date). */
export async function ollamaRunningEntry(info: EngineInfo, modelId: string): Promise<OllamaModelEntry> {
    return {...await ollamaTagsEntry(info, modelId), expires_at: "2318-01-01T00:00:00Z",
        size_vram: info.backend === "cpu" ? 0 : info.model.sizeBytes, context_length: info.contextSize};
}

/**
 * `/api/show`: `parameters` gives `num_ctx` (the context a request may fill); `template`, for a model with FIM tokens,
 * says in Ollama's template language that a suffix is filled in the middle (Continue enables its FIM autocomplete on
 * `.Suffix` in it; chat prompts are rendered with the model's own Jinja template, not shown). `model_info` carries
 * the GGUF keys clients read — the architecture, and the context a request may fill as `<architecture>.context_length`
 * (the engine's per-sequence context, not the larger one the model was trained for); `capabilities` what requests may
 * use: completion, tools (a chat template), insert (FIM tokens), thinking (a reasoning segment in the template).
 */
export async function ollamaShow(info: EngineInfo): Promise<OllamaShowResponse> {
    const {model} = info;
    const capabilities = ["completion", ...model.toolCalling === true ? ["tools"] : [], ...model.fillInMiddle === true ? ["insert"] : [],
        ...model.reasoning === true ? ["thinking"] : []];
    return {
        license: "", modelfile: `# served by inference-monitor\nFROM ${model.path}\n`,
        // What Continue reads: the context a request may fill, and whether the template takes a suffix (its FIM test).
        parameters: `num_ctx ${info.contextSize}`,
        template: model.fillInMiddle === true ? fimTemplate : "",
        details: details(info),
        model_info: {
            "general.architecture": model.architecture, "general.basename": model.name, "general.parameter_count": model.parameterCount,
            [`${model.architecture}.context_length`]: info.contextSize
        },
        capabilities, modified_at: await modifiedAt(info)
    };
}
