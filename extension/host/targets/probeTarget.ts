/**
 * What answers at a URL: vLLM (`vllm:` metrics; our own `serve` too, though it also answers Ollama's `/api/version` and
 * llama.cpp's `/props`), llama.cpp's server (`/props` with its slots, or `llamacpp:` metrics), Ollama (`/api/version`). A
 * server that only speaks the OpenAI API (LM Studio, …) exports nothing to watch: the error says to put the proxy in front.
 */
import type {TargetKind} from "../../../protocol/targetView.js";
import {isObject} from "../../../protocol/validation.js";
import {targetGet, TargetReadError, type TargetGetOptions, type TargetResponse} from "./targetHttp.js";

/** The usual local ports, for "Attach to Server…" to try. */
export const wellKnownLocalServers: ReadonlyArray<{port: number, name: string}> = [
    {port: 11434, name: "Ollama"}, {port: 8080, name: "llama.cpp"}, {port: 1234, name: "LM Studio"}, {port: 8000, name: "vLLM"}
];

export async function probeTarget(baseUrl: string, http: TargetGetOptions = {}): Promise<TargetKind> {
    const attempt = async (path: string): Promise<TargetResponse | TargetReadError> => {
        try {
            return await targetGet(`${baseUrl}${path}`, http);
        } catch (error) {
            if (error instanceof TargetReadError)
                return error;
            throw error;
        }
    };
    const [version, props, metrics, models] = await Promise.all(["/api/version", "/props", "/metrics", "/v1/models"].map(attempt));
    const answers = [version, props, metrics, models].filter((r): r is TargetResponse => !(r instanceof TargetReadError));
    if (answers.length === 0) {
        const failures = [version, props, metrics, models].filter((r) => r instanceof TargetReadError);
        throw failures.find((failure) => failure.kind === "auth") ?? failures[0] ?? new TargetReadError(`${baseUrl}: no answer`, "unreachable");
    }
    // First: vLLM's metrics (our own `serve` exports them and answers llama.cpp's /props too; llama-server never has them).
    if (isOk(metrics) && /^vllm:/m.test(metrics.text))
        return "vllm";
    if (isJsonWith(props, (json) => "total_slots" in json || "default_generation_settings" in json))
        return "llamacpp";
    if (isOk(metrics) && /^llamacpp:/m.test(metrics.text))
        return "llamacpp";
    // Last: servers that export metrics may also speak Ollama's API (our own `serve` does), and their metrics say more.
    if (isJsonWith(version, (json) => typeof json.version === "string"))
        return "ollama";
    throw new TargetReadError(`${baseUrl} answers, but neither as Ollama, llama.cpp's server nor vLLM ` +
        `(${isOk(models) ? "it serves /v1/models only: watch its traffic with `inference-monitor proxy --upstream` instead" : "no /api/version, /props or /metrics"})`, "bad");
}

function isOk(response: TargetResponse | TargetReadError): response is TargetResponse {
    return !(response instanceof TargetReadError) && response.status === 200;
}

function isJsonWith(response: TargetResponse | TargetReadError, test: (json: Record<string, unknown>) => boolean): boolean {
    if (!isOk(response))
        return false;
    try {
        const json: unknown = JSON.parse(response.text);
        return isObject(json) && test(json);
    } catch {
        return false;
    }
}
