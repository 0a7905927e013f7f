/**
 * `POST /v1/embeddings` (OpenAI, vLLM, llama.cpp's server), `POST /api/embed` and `/api/embeddings` (Ollama) on the
 * Engine: each input is one engine request — queued, evaluated, measured and shown like every other, labelled with
 * its client — and the answer carries the vectors L2-normalized (as OpenAI's, llama.cpp's server's and Ollama's are;
 * the legacy `/api/embeddings` gives the raw one, as Ollama does). A client that goes away cancels what still waits.
 */
import type http from "node:http";
import {
    type EmbeddingsRequest, type EmbeddingsResponse, type OllamaEmbedResponse
} from "../../../protocol/embeddingsApi.js";
import {ApiRequestError} from "../../../protocol/openaiFields.js";
import type {EngineClient} from "../engineClient/engineClient.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {RequestResult} from "../engineClient/requestState.js";
import {checkQueue, refusal, type GenerationContext} from "../openai/engineRequest.js";

type Embedded = {vectors: number[][], promptTokens: number};

/** Scales `vector` to unit length (a zero vector stays as it is). */
export function normalized(vector: readonly number[]): number[] {
    const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
    return norm > 0 ? vector.map((value) => value / norm) : [...vector];
}

/** An input the engine refused or failed, as the generating routes answer it, naming the input. */
function inputRefusal(result: RequestResult, index: number, client: EngineClient): ApiRequestError {
    const error = `input[${index}]: ${result.error ?? `the request ended with ${result.reason}`}`;
    return refusal({...result, error}, client, {responseFormat: "input", maxTokens: "input", input: "input"});
}

/** Runs every input; resolves with the raw vectors in order, or throws the first refusal. Undefined: the client left. */
async function embedAll(request: EmbeddingsRequest, context: GenerationContext): Promise<Embedded | undefined> {
    const {client, response} = context;
    checkQueue(context);
    const handles: RequestHandle[] = request.inputs.map((input) =>
        client.embed({...input, ...request.truncate ? {truncate: true} : {}, client: context.clientLabel}));
    const onClose = (): void => {
        if (!response.writableFinished)
            for (const handle of handles) handle.cancel();
    };
    response.on("close", onClose);
    try {
        const results = await Promise.all(handles.map((handle) => handle.done));
        if (response.destroyed)
            return undefined;
        const failed = results.findIndex((result) => result.embedding === undefined);
        if (failed >= 0) {
            for (const handle of handles) handle.cancel();
            throw inputRefusal(results[failed]!, failed, client);
        }
        return {vectors: results.map((result) => result.embedding!),
            promptTokens: results.reduce((sum, result) => sum + result.promptTokens, 0)};
    } finally {
        response.off("close", onClose);
    }
}

/** The first `dimensions` of a unit vector, renormalized (OpenAI's and Ollama's shortening); all when absent. */
function shortened(vector: number[], dimensions: number | undefined): number[] {
    if (dimensions === undefined || dimensions === vector.length)
        return normalized(vector);
    if (dimensions > vector.length)
        throw new ApiRequestError(`dimensions: this model's embeddings have ${vector.length} dimensions, fewer than ${dimensions}`, "dimensions");
    return normalized(vector.slice(0, dimensions));
}

function base64Of(vector: readonly number[]): string {
    return Buffer.from(Float32Array.from(vector).buffer).toString("base64");
}

function sendJson(response: http.ServerResponse, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(200, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

export async function serveEmbeddings(request: EmbeddingsRequest, context: GenerationContext): Promise<void> {
    const embedded = await embedAll(request, context);
    if (embedded === undefined)
        return;
    const answer: EmbeddingsResponse = {
        object: "list",
        data: embedded.vectors.map((vector, index) => {
            const unit = shortened(vector, request.dimensions);
            return {object: "embedding" as const, index, embedding: request.encoding === "base64" ? base64Of(unit) : unit};
        }),
        model: context.modelId,
        usage: {prompt_tokens: embedded.promptTokens, total_tokens: embedded.promptTokens}
    };
    sendJson(context.response, answer);
}

export async function serveOllamaEmbed(request: EmbeddingsRequest, context: GenerationContext): Promise<void> {
    const started = performance.now();
    const embedded = await embedAll(request, context);
    if (embedded === undefined)
        return;
    const answer: OllamaEmbedResponse = {
        model: request.model, embeddings: embedded.vectors.map((vector) => shortened(vector, request.dimensions)),
        total_duration: Math.round((performance.now() - started) * 1e6), load_duration: 0, prompt_eval_count: embedded.promptTokens
    };
    sendJson(context.response, answer);
}

/** Ollama's legacy route: one prompt, its raw vector (an empty prompt: an empty vector, as Ollama answers). */
export async function serveOllamaLegacyEmbeddings(prompt: string, context: GenerationContext): Promise<void> {
    if (prompt === "")
        return sendJson(context.response, {embedding: []});
    const embedded = await embedAll({inputs: [{text: prompt}], encoding: "float", truncate: true, model: ""}, context);
    if (embedded !== undefined)
        sendJson(context.response, {embedding: embedded.vectors[0]});
}
