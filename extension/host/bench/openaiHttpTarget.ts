/**
 * The benchmark's HTTP target: the same workload sent to any OpenAI-compatible server (ours, llama.cpp's
 * llama-server, vLLM, Ollama's /v1) as streamed completions, measured client-side like vLLM's
 * `backend_request_func.py` (`async_request_openai_completions` / `_chat_completions`):
 *
 * - start = just before the request is sent; TTFT = first chunk carrying text − start;
 * - ITL = the gaps between successive chunks carrying text; e2el = the last `data:` chunk − start;
 * - output tokens = the final `usage.completion_tokens` (`stream_options.include_usage`), else the
 *   number of text chunks (vLLM tokenizes the text instead; we have no tokenizer);
 * - a request without any text chunk, an HTTP error status, a `data: {"error": …}` event or a broken
 *   connection is failed, its message kept.
 *
 * One deliberate difference: vLLM starts the clock at the first chunk with `choices`, even one without
 * text. Servers that send the chat `role` chunk before prefill (ours, llama.cpp) would then report a
 * TTFT of ~0 and an extra ITL gap, so only chunks with text count here (vLLM's own server sends the role
 * chunk with the first token, so there the two agree).
 */
import http from "node:http";
import https from "node:https";
import {createParser} from "eventsource-parser";
import {nowMs} from "../../../common/clock.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {parseStreamChunk, type Usage} from "../../../protocol/openaiApi.js";
import {isObject} from "../../../protocol/validation.js";
import type {BenchResult} from "./benchMetrics.js";
import type {BenchRequest, BenchTarget} from "./workload.js";

export const benchEndpoints = ["completions", "chat"] as const;
/** `completions` = POST {base}/completions with `prompt`; `chat` = POST {base}/chat/completions with one user message. */
export type BenchEndpoint = typeof benchEndpoints[number];

export type HttpTargetOptions = {
    /** The API's base URL as OpenAI clients take it (`http://127.0.0.1:8719/v1`); a bare origin gets `/v1`. */
    baseUrl: string,
    endpoint: BenchEndpoint,
    /** Sent as `Authorization: Bearer KEY`. */
    apiKey?: string,
    /** The request's `model` field; default the first id of GET {base}/models. */
    modelName?: string,
    /**
     * Sent as llama.cpp's request field `cache_prompt` (llama-server's default is true: reuse the slot's
     * KV cache for the prompt's common prefix); false turns its prefix cache off for the request. Other
     * servers are expected to ignore an unknown field (ours does). Absent: not sent.
     */
    cachePrompt?: boolean
};

/** One request as the HTTP client saw it. */
export type HttpRequestResult = BenchResult & {
    text: string,
    /** Why it failed (reason `error` or `abort`). */
    error?: string,
    /** Whether the server reported `usage` (token counts are the server's own); false: counted as text chunks. */
    usage: boolean
};

/** The server cannot be benchmarked at all (unreachable, no model list): nothing was sent. */
export class BenchTargetError extends Error {
    override readonly name = "BenchTargetError";
}

/** `http://host:port/v1` from what the user gave: no trailing slash; a bare origin gets `/v1`. Throws on a non-http(s) URL. */
export function normalizeBaseUrl(raw: string): string {
    let url: URL;
    try {
        url = new URL(raw);
    } catch {
        throw new Error(`not a URL: ${JSON.stringify(raw)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
        throw new Error(`expected an http:// or https:// URL, got ${JSON.stringify(raw)}`);
    const pathname = url.pathname.replace(/\/+$/, "");
    return `${url.origin}${pathname === "" ? "/v1" : pathname}`;
}

/** A fetch failure's useful part: undici throws "fetch failed" with the socket error as `cause`. */
function fetchFailure(error: unknown): string {
    const cause = error instanceof Error ? error.cause : undefined;
    if (cause instanceof AggregateError && cause.errors.length > 0)
        return errorMessage(cause.errors[0]);
    return cause !== undefined ? errorMessage(cause) : errorMessage(error);
}

/** Tries per request when the connection turns out closed before anything was sent back. */
export const maxSendAttempts = 8;

/** Whether a request failed because the server closed its connection before answering ("socket hang up", a reset). */
function isStaleConnection(error: unknown): boolean {
    const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : "";
    return code === "ECONNRESET" || code === "EPIPE";
}

/** How long a request may see no data (headers or body) before it fails. */
const idleTimeoutMs = 300_000;

/** `HTTP 400: message` from an error response (OpenAI's `{"error": {"message"}}` body, else its text). */
function statusFailure(status: number, statusText: string, text: string): string {
    let message = text.trim().slice(0, 500);
    try {
        const body: unknown = JSON.parse(text);
        if (isObject(body) && isObject(body.error) && typeof body.error.message === "string")
            message = body.error.message;
        else if (isObject(body) && typeof body.error === "string")
            message = body.error;
    } catch {
        // not JSON: keep the text
    }
    return `HTTP ${status}${message !== "" ? `: ${message}` : statusText !== "" ? ` ${statusText}` : ""}`;
}

export class OpenAiHttpTarget implements BenchTarget<HttpRequestResult> {
    /** Requests sent a second time because their kept-alive connection had been closed by the server. */
    resentRequests = 0;
    private readonly url: string;
    private readonly headers: Record<string, string>;
    /**
     * Node's own HTTP client on kept-alive connections, as vLLM's benchmark uses aiohttp: fetch's web
     * streams cost this client ~1.5 ms per request before the first chunk reached the parser, time a
     * benchmark would have charged to the server.
     */
    private readonly agent: http.Agent;

    private constructor(readonly baseUrl: string, readonly endpoint: BenchEndpoint, readonly model: string, apiKey: string | undefined,
        private readonly cachePrompt: boolean | undefined) {
        this.url = `${baseUrl}/${endpoint === "chat" ? "chat/completions" : "completions"}`;
        // X-Title labels the requests `bench` in servers that break stats down by client (ours), as over IPC.
        this.headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "User-Agent": "inference-monitor-bench", "X-Title": "bench",
            ...(apiKey !== undefined && apiKey !== "" ? {Authorization: `Bearer ${apiKey}`} : {})};
        this.agent = new (this.url.startsWith("https:") ? https.Agent : http.Agent)({keepAlive: true});
    }

    /** The target; without `modelName`, asks GET {base}/models. Throws BenchTargetError when the server cannot be used. */
    static async connect(options: HttpTargetOptions): Promise<OpenAiHttpTarget> {
        const baseUrl = normalizeBaseUrl(options.baseUrl);
        const model = options.modelName ?? await firstModelId(baseUrl, options.apiKey);
        return new OpenAiHttpTarget(baseUrl, options.endpoint, model, options.apiKey, options.cachePrompt);
    }

    /** The endpoint's URL: `{base}/completions` or `{base}/chat/completions`. */
    get endpointUrl(): string {
        return this.url;
    }

    send(request: BenchRequest): {done: Promise<HttpRequestResult>, cancel(): void} {
        const abort = new AbortController();
        return {done: this.request(request, abort.signal), cancel: () => abort.abort()};
    }

    private async request(request: BenchRequest, signal: AbortSignal): Promise<HttpRequestResult> {
        const body = JSON.stringify({
            model: this.model,
            ...(this.endpoint === "chat" ? {messages: [{role: "user", content: request.prompt}]} : {prompt: request.prompt}),
            max_tokens: request.maxTokens,
            ignore_eos: true,
            temperature: request.temperature,
            seed: request.seed,
            stream: true,
            stream_options: {include_usage: true},
            ...(this.cachePrompt !== undefined ? {cache_prompt: this.cachePrompt} : {})
        });
        const start = nowMs();
        const result: HttpRequestResult = {reason: "error", arrival: start, lastDelivered: start, promptTokens: 0, generatedTokens: 0,
            deliveries: [], text: "", usage: false};
        const fail = (message: string): HttpRequestResult => {
            result.reason = signal.aborted ? "abort" : "error";
            result.error = signal.aborted ? "cancelled" : message;
            return result;
        };
        let response: http.IncomingMessage;
        for (let attempt = 1; ; attempt++) {
            try {
                response = await this.post(body, signal);
                break;
            } catch (error) {
                // llama.cpp's server closes the connection after each streamed response without saying so
                // (no `Connection: close`), so the pool can hand out a socket whose FIN is still in flight, and
                // every pooled socket can be one. Nothing reached the server: the request goes out again, as
                // curl does; each try drops one dead socket, so a few always reach a live or new one. The
                // time lost stays in this request's TTFT.
                if (attempt < maxSendAttempts && !signal.aborted && isStaleConnection(error)) {
                    this.resentRequests++;
                    continue;
                }
                return fail(`POST ${this.url}: ${errorMessage(error)}`);
            }
        }
        const status = response.statusCode ?? 0;
        if (status < 200 || status > 299)
            return fail(statusFailure(status, response.statusMessage ?? "", await readText(response).catch(() => "")));

        // Written from the parser's callback (an object, so TypeScript does not narrow it to its initial value).
        const seen: {failure?: string, finishReason: string | null, done: boolean, usage?: Usage} = {finishReason: null, done: false};
        const parser = createParser({onEvent: (event) => {
            const t = nowMs();
            if (event.data.trim() === "[DONE]") {
                seen.done = true;
                return;
            }
            let chunk;
            try {
                chunk = parseStreamChunk(JSON.parse(event.data));
            } catch (error) {
                seen.failure ??= `malformed stream chunk: ${errorMessage(error)}`;
                return;
            }
            result.lastDelivered = t;
            if (chunk.error !== undefined) {
                seen.failure ??= chunk.error;
                return;
            }
            if (chunk.text !== "") {
                // The client cannot see how many tokens a chunk carries; each counts as one delivery (one ITL gap).
                result.deliveries.push({t, tokens: 1});
                result.text += chunk.text;
            }
            seen.finishReason = chunk.finishReason ?? seen.finishReason;
            seen.usage = chunk.usage ?? seen.usage;
        }});
        try {
            // Fed from the socket's own 'data' events: no stream adapters between the bytes and their timestamp.
            response.setEncoding("utf8");
            await new Promise<void>((resolve, reject) => {
                response.on("data", (text: string) => parser.feed(text));
                response.once("end", resolve);
                response.once("error", reject);
                response.once("close", () => {
                    if (!response.complete)
                        reject(new Error("the connection closed before the response ended"));
                });
            });
        } catch (error) {
            return fail(`the stream broke off: ${errorMessage(error)}`);
        }
        if (seen.failure !== undefined)
            return fail(seen.failure);
        if (result.deliveries.length === 0)
            return fail("never received a chunk with text (vLLM marks such a request failed)");
        if (seen.finishReason === null && !seen.done)
            return fail("the stream ended without a finish_reason or [DONE]");
        result.reason = seen.finishReason === "length" ? "length" : "stop";
        if (seen.usage !== undefined) {
            result.usage = true;
            result.promptTokens = seen.usage.prompt_tokens;
            result.generatedTokens = seen.usage.completion_tokens;
        } else
            result.generatedTokens = result.deliveries.length;
        return result;
    }

    /** POSTs `body` on a pooled keep-alive connection; resolves with the response once its status line and headers arrived. */
    private post(body: string, signal: AbortSignal): Promise<http.IncomingMessage> {
        return new Promise((resolve, reject) => {
            const send = this.url.startsWith("https:") ? https.request : http.request;
            const outgoing = send(this.url, {method: "POST", agent: this.agent, signal,
                headers: {...this.headers, "Content-Length": Buffer.byteLength(body)}}, resolve);
            outgoing.once("error", reject);
            // undici's fetch gave up after 300 s without headers or body data; so does this client.
            outgoing.setTimeout(idleTimeoutMs, () => outgoing.destroy(new Error(`no data for ${idleTimeoutMs / 1000} s`)));
            outgoing.end(body);
        });
    }

    /** Closes the pooled connections (idle ones never keep the process alive; this frees them at once). */
    close(): void {
        this.agent.destroy();
    }
}

/** The whole body of a (short) error response. */
async function readText(response: http.IncomingMessage): Promise<string> {
    response.setEncoding("utf8");
    let text = "";
    for await (const piece of response as AsyncIterable<string>)
        text += piece;
    return text;
}

async function firstModelId(baseUrl: string, apiKey: string | undefined): Promise<string> {
    const url = `${baseUrl}/models`;
    let response: Response;
    try {
        response = await fetch(url, {headers: apiKey !== undefined && apiKey !== "" ? {Authorization: `Bearer ${apiKey}`} : {}});
    } catch (error) {
        throw new BenchTargetError(`could not reach ${url}: ${fetchFailure(error)}`);
    }
    if (!response.ok)
        throw new BenchTargetError(`GET ${url}: ${statusFailure(response.status, response.statusText, await response.text().catch(() => ""))}`);
    let body: unknown;
    try {
        body = await response.json();
    } catch (error) {
        throw new BenchTargetError(`GET ${url}: not a JSON model list (${errorMessage(error)})`);
    }
    const first: unknown = isObject(body) && Array.isArray(body.data) ? body.data[0] : undefined;
    if (!isObject(first) || typeof first.id !== "string")
        throw new BenchTargetError(`GET ${url} lists no model; name one with --model-name`);
    return first.id;
}
