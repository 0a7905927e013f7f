/**
 * One API request on the engine, for every generating route (chat and text completions, responses): the same
 * back-pressure, the same cancel on disconnect, and the engine's refusals as API errors naming the route's fields.
 */
import type http from "node:http";
import {ApiRequestError} from "../../../protocol/openaiFields.js";
import {checkLogitBias} from "../../../protocol/openaiSampling.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import type {EngineClient} from "../engineClient/engineClient.js";
import type {RequestHandle} from "../engineClient/requestHandle.js";
import type {RequestResult} from "../engineClient/requestState.js";
import {generationInput, type GenerationParams, type GenerationSource} from "../chat/generationInput.js";
import {startEventStream} from "../net/eventStream.js";

export type GenerationContext = {
    client: EngineClient,
    info: EngineInfo,
    modelId: string,
    /** Who sent it (the stats break requests down by this). */
    clientLabel: string,
    /** Refuse with 503 when this many requests (at least one) already wait for a sequence. */
    maxWaiting: number,
    /** A stream silent this long gets a keep-alive comment (eventStream.ts); ≤ 0: never. */
    ssePingIntervalMs: number,
    /** The LoRA scales the request asked for, one per adapter (its `lora`); undefined: the server's. */
    loraScales?: readonly number[],
    request: http.IncomingMessage,
    response: http.ServerResponse
};

/**
 * The route's names for the fields an engine refusal may be about; `input`: the field any other invalid request is
 * about (embeddings: their input), where the route has one.
 */
export type RefusalFields = {responseFormat: string, maxTokens: string, suffix?: string, input?: string};

/**
 * Sends the request and waits until the engine has queued it (so a refused request still gets its status line),
 * then runs `answer` with its handle. A refusal throws the API error; a client that goes away cancels its request
 * (the engine stops it at its next token, reason `abort`), and when it went away before the queueing, nothing runs.
 */
export async function runEngineRequest(context: GenerationContext, input: GenerationSource, params: GenerationParams,
                                       fields: RefusalFields, answer: (handle: RequestHandle) => Promise<void>): Promise<void> {
    await runEngineRequests(context, [{input, params}], fields, ([handle]) => answer(handle!));
}

/** One engine request of an API request: what it generates from, and how. */
export type EngineJob = {input: GenerationSource, params: GenerationParams};

/**
 * As runEngineRequest, for several requests (OpenAI's `n` choices, a batch of prompts), one per job: all are sent at
 * once; one refused refuses them all (the others are cancelled); a client that goes away cancels them all.
 */
export async function runEngineRequests(context: GenerationContext, jobs: readonly EngineJob[],
                                        fields: RefusalFields, answer: (handles: RequestHandle[]) => Promise<void>): Promise<void> {
    const {client, info, response} = context;
    checkQueue(context);
    for (const job of jobs)
        checkLogitBias(job.params.logitBias, info.model.vocabularySize);
    const loraScales = context.loraScales;
    const handles = jobs.map((job) => client.generate({...generationInput(job.input, job.params, info, context.clientLabel),
        ...loraScales !== undefined ? {loraScales: [...loraScales]} : {}}));
    const cancelAll = (): void => {
        for (const handle of handles) handle.cancel();
    };
    const onClose = (): void => {
        if (!response.writableFinished)
            cancelAll();
    };
    response.on("close", onClose);
    try {
        const queued = await Promise.all(handles.map((handle) => handle.queued));
        const refused = queued.indexOf(false);
        if (refused >= 0) {
            cancelAll();
            const result = await handles[refused]!.done;
            if (result.reason === "abort" && response.destroyed)
                return;
            throw refusal(result, client, fields);
        }
        await answer(handles);
    } finally {
        response.off("close", onClose);
    }
}

/**
 * Back-pressure before a request is sent: refused (503) only when requests already wait, so this one would wait
 * behind them. Whether a request arriving at an empty queue must wait depends on the sequences, which only the engine
 * knows: its own cap (`serve` sets it to the same number) refuses that case, so `--max-waiting 0` means "never wait".
 */
export function checkQueue({client, maxWaiting}: GenerationContext): void {
    if (client.waitingCount > 0 && client.waitingCount >= maxWaiting)
        throw queueFull(`the server is busy: ${client.waitingCount} requests are waiting (at most ${maxWaiting}); retry shortly`);
}

/** 503 `queue_full`: the server answers it with `Retry-After` (apiServer.ts). */
function queueFull(message: string): ApiRequestError {
    return new ApiRequestError(message, null, 503, "server_error", "queue_full");
}

/** The API field of an engine refusal whose message starts with an engine request field's name. */
const engineFieldParams: ReadonlyArray<readonly [string, string]> = [["grammar:", "grammar"], ["tools:", "tools"], ["toolChoice:", "tool_choice"],
    ["stopTokenIds:", "stop_token_ids"], ["minTokens", "min_tokens"], ["dry:", "dry_multiplier"], ["xtc:", "xtc_probability"],
    ["badWords", "bad_words"], ["truncatePromptTokens", "truncate_prompt_tokens"]];

/** The API error for a request the engine refused or failed. */
export function refusal(result: RequestResult, client: EngineClient, fields: RefusalFields): ApiRequestError {
    const message = result.error ?? `the request ended with ${result.reason}`;
    if (result.errorCode === "invalid_request") {
        const named = engineFieldParams.find(([prefix]) => message.startsWith(prefix))?.[1];
        return new ApiRequestError(message, message.startsWith("responseFormat:") ? fields.responseFormat : named
            ?? (fields.suffix !== undefined && message.includes("suffix") ? fields.suffix : fields.input ?? null), 400);
    }
    if (result.errorCode === "context_length_exceeded")
        return new ApiRequestError(message, fields.input ?? fields.maxTokens, 400, "invalid_request_error", "context_length_exceeded");
    // The engine's own cap (EngineOptions.maxWaitingRequests): the same 503 + Retry-After as `maxWaiting` here.
    if (result.errorCode === "queue_full")
        return queueFull(message);
    if (client.state !== "ready")
        return new ApiRequestError(`the model is not running: ${message}`, null, 503, "server_error", "engine_unavailable");
    return new ApiRequestError(message, null, 500, "server_error", "engine_error");
}

/**
 * Starts a server-sent-event stream of `data:` events (OpenAI's and llama.cpp's), pinged while silent (eventStream.ts):
 * the status line and headers go out now; the function returned writes one event, or nothing once the client has gone.
 */
export function openEventStream({response, ssePingIntervalMs}: Pick<GenerationContext, "response" | "ssePingIntervalMs">
): (data: unknown) => void {
    const write = startEventStream(response, ssePingIntervalMs);
    return (data) => write(`data: ${JSON.stringify(data)}\n\n`);
}
