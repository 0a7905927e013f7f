/**
 * The OpenAI-compatible endpoint: the user's own tools (Continue, Cline, the `openai` SDK, curl …)
 * run on the monitored Engine, and every request they make is queued, scheduled, measured and shown
 * like the product's own. One HTTP server, one port:
 *
 *   GET  /v1/models            the loaded model (`id` = the model file's name, stable across restarts)
 *   GET  /v1/models/{id}       that model (OpenAI's "retrieve model"; 404 model_not_found for another id)
 *   POST /v1/chat/completions  chat (JSON or SSE stream); it, /v1/completions and /v1/models also without `/v1`, as llama.cpp's
 *                              server serves them
 *   POST /v1/completions       text completion, fill-in-the-middle with `suffix`
 *   POST /v1/responses         OpenAI's Responses API (stateless: the whole conversation as `input`)
 *   POST /v1/messages          Anthropic's Messages API (Claude Code; errors in Anthropic's shape, `x-api-key` accepted)
 *   POST /v1/messages/count_tokens  the prompt tokens of such a request
 *   POST /tokenize, /detokenize     token ids of a text or a chat's prompt, and back (llama.cpp's and vLLM's shapes)
 *   GET  /tokenizer_info       the tokenizer's special tokens and chat template (vLLM's; evaluation harnesses read it)
 *   POST /completion, /infill  llama.cpp's server's own completion API (llama.vscode's code completion)
 *   POST /v1/embeddings        embeddings (OpenAI's shape; float or base64), one engine request per input
 *   POST /api/chat, /api/generate   Ollama's native API (NDJSON streams; errors as `{"error": …}`), with /api/embed,
 *   GET  /api/version, /api/tags, /api/ps, POST /api/show   the model as Ollama describes one (Copilot Chat's Ollama models)
 *   GET  /health               200 {"status":"ok"} when ready, 503 while loading or without a model
 *   GET  /metrics              the Prometheus exposition (vLLM names), when `metrics` is given
 *   GET  /, WS /stream …       the live dashboard, when `dashboard` is given (with its access token: `dashboardUrl`)
 *
 * Security: binds 127.0.0.1 by default; any other bind needs an API key. A loopback bind answers only
 * to loopback Host names (DNS rebinding); a browser Origin other than this server's own page (or one
 * allow-listed) is refused, so a web page cannot drive the local model. With keys, `/v1/*` requires
 * `Authorization: Bearer KEY` (checked in constant time).
 */
import http from "node:http";
import {servedModelId} from "../servedModelId.js";
import {parseChatCompletionRequest, parseCompletionRequest, type ModelList} from "../../../protocol/openaiApi.js";
import {apiErrorBody, ApiRequestError} from "../../../protocol/openaiFields.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {DashboardServer, type DashboardServerOptions} from "../dashboard/dashboardServer.js";
import type {EngineClient} from "../engineClient/engineClient.js";
import {allowedHostHeader, allowedOrigin, isLoopbackAddress} from "../net/hostCheck.js";
import {listen} from "../net/listen.js";
import type {MetricsBody} from "../stats/loggers/metricsHttpServer.js";
import {ApiKeyCheck, type ApiKey} from "./apiKeys.js";
import {clientLabel} from "./clientLabel.js";
import {serveChatCompletion, serveCompletion} from "./generationRoute.js";
import {serveResponse} from "./responsesRoute.js";
import {serveMessages} from "../anthropic/messagesRoute.js";
import {parseMessagesRequest, type MessagesRequest} from "../../../protocol/anthropicMessages.js";
import {parseDetokenizeRequest, parseTokenizeRequest, type DetokenizeAnswer, type TokenizeAnswer, type TokenizeRequest,
    type TokenizerInfoAnswer} from "../../../protocol/tokenizeApi.js";
import {anthropicErrorType, type AnthropicErrorBody} from "../../../protocol/anthropicMessageObjects.js";
import {parseResponsesRequest} from "../../../protocol/openaiResponses.js";
import {ollamaApiVersion, parseOllamaChatRequest, parseOllamaGenerateRequest, parseOllamaShowRequest, type OllamaErrorBody} from "../../../protocol/ollamaApi.js";
import {ollamaRunningEntry, ollamaShow, ollamaTagsEntry} from "../ollama/ollamaModel.js";
import {serveOllama} from "../ollama/ollamaRoute.js";
import {serveLlamaCompletion} from "../llamacpp/completionRoute.js";
import {applyTemplate, llamaCppProps} from "../llamacpp/propsRoute.js";
import {hasIdleSlot, llamaCppSlots} from "../llamacpp/slotsRoute.js";
import {parseSlotAction, parseSlotId, runSlotAction, slotActionsOff, slotFile} from "../llamacpp/slotActionsRoute.js";
import {loraAdapters, setLoraAdapters} from "../llamacpp/loraAdaptersRoute.js";
import {requestLoraScales} from "../../../protocol/loraAdapters.js";
import {parseLlamaCompletionRequest} from "../../../protocol/llamaCppApi.js";
import {ignoredSamplingFields} from "../../../protocol/ignoredSamplingFields.js";
import {isObject} from "../../../protocol/validation.js";
import {parseSsePingInterval} from "../../../protocol/streamKeepAlive.js";
import {defaultSsePingIntervalS} from "../net/eventStream.js";
import {parseEmbeddingsRequest, parseOllamaEmbedRequest, parseOllamaLegacyEmbeddingsRequest} from "../../../protocol/embeddingsApi.js";
import {serveEmbeddings, serveOllamaEmbed, serveOllamaLegacyEmbeddings} from "../embeddings/embeddingsRoute.js";

/** The default port: clear of Ollama (11434), llama.cpp (8080), LM Studio (1234) and vLLM (8000). */
export const defaultApiPort = 8719;
/** Requests waiting for a sequence before new ones get 503. */
export const defaultMaxWaiting = 256;
/** Request bodies above this get 413. */
export const maxRequestBodyBytes = 1 << 20;

/** Where the endpoint finds the engine: the CLI's one client, or whichever the extension runs now. */
export type ApiEngineSource = {current(): EngineClient | undefined};

export type ApiServerOptions = {
    engine: ApiEngineSource,
    /** Default `defaultApiPort`; 0 = a free one. */
    port?: number,
    /** Default 127.0.0.1. A non-loopback address requires `apiKeys`. */
    host?: string,
    apiKeys?: readonly ApiKey[],
    maxWaiting?: number,
    /**
     * Seconds a stream may stay silent before a keep-alive comment (net/eventStream.ts; ≤ 0: never). Default
     * `defaultSsePingIntervalS`, as llama-server's; a request's `sse_ping_interval` (llama.cpp's field) overrides it.
     */
    ssePingIntervalS?: number,
    /** Browser origins allowed to call the API besides this server's own page. */
    allowedOrigins?: readonly string[],
    /** Renders `/metrics`; absent = 404. */
    metrics?: () => Promise<MetricsBody>,
    /** Serves the dashboard at `/` (and its WebSocket); absent = 404. */
    dashboard?: Omit<DashboardServerOptions, "port" | "host">,
    /** Requests refused for a reason worth logging (bad host/origin/key, malformed body). */
    onRejected?: (reason: string) => void,
    /** A sampling field served without (ignoredSamplingFields.ts): said once per field while the server runs. */
    onIgnoredField?: (message: string) => void,
    /**
     * The directory llama.cpp's slot actions save to and restore from (llama-server's `--slot-save-path`, an existing
     * directory); absent: they answer 501, as llama-server's without one.
     */
    slotSavePath?: string
};

export class ApiServerError extends Error {
    override readonly name = "ApiServerError";
}

const baseHeaders = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"};

export class ApiServer {
    /** Requests refused before reaching a route (host, origin, key, body), for the stats and tests. */
    rejectedCount = 0;
    private dashboard: DashboardServer | undefined;
    private readonly keys: ApiKeyCheck;
    private closed = false;
    /** The sampling fields already reported as ignored (onIgnoredField). */
    private readonly reportedIgnored = new Set<string>();

    private constructor(
        private readonly options: ApiServerOptions,
        private readonly server: http.Server,
        readonly host: string,
        readonly port: number
    ) {
        this.keys = new ApiKeyCheck(options.apiKeys ?? []);
    }

    /** Starts serving; rejects with PortInUseError (net/listen.ts) when the port is taken, ApiServerError on bad options. */
    static async listen(options: ApiServerOptions): Promise<ApiServer> {
        const host = options.host ?? "127.0.0.1";
        const port = options.port ?? defaultApiPort;
        if (!Number.isInteger(port) || port < 0 || port > 65535)
            throw new ApiServerError(`port must be an integer 0..65535, got ${port}`);
        if (!isLoopbackAddress(host) && (options.apiKeys ?? []).length === 0)
            throw new ApiServerError(`listening on ${host} makes the model reachable from the network: give an API key (--api-key) or bind 127.0.0.1`);
        let api: ApiServer | undefined;
        const server = http.createServer((request, response) => {
            if (api === undefined)
                response.writeHead(503).end();
            else
                void api.handle(request, response);
        });
        const address = await listen(server, {host, port, purpose: "OpenAI-compatible API"});
        api = new ApiServer(options, server, host, address.port);
        if (options.dashboard !== undefined) {
            try {
                api.dashboard = await DashboardServer.mount(server, {host, port: address.port}, options.dashboard);
            } catch (error) {
                server.close();
                throw error;
            }
        }
        return api;
    }

    /** `http://127.0.0.1:PORT/` */
    get url(): string {
        return `http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}/`;
    }

    /** The dashboard's page with its access token (`http://127.0.0.1:PORT/?token=…`), when it is served. */
    get dashboardUrl(): string | undefined {
        return this.dashboard?.url;
    }

    /** The base URL tools are configured with: `http://127.0.0.1:PORT/v1`. */
    get baseUrl(): string {
        return `${this.url}v1`;
    }

    async close(): Promise<void> {
        if (this.closed)
            return;
        this.closed = true;
        await this.dashboard?.close();
        this.server.closeAllConnections();
        await new Promise<void>((resolve) => this.server.close(() => resolve()));
    }

    private reject(response: http.ServerResponse, error: ApiRequestError, why: string): void {
        this.rejectedCount++;
        this.options.onRejected?.(why);
        sendError(response, error);
    }

    private async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
        try {
            await this.route(request, response);
        } catch (error) {
            if (error instanceof ApiRequestError) {
                if (error.status === 400 || error.status === 413)
                    this.rejectedCount++;
                sendError(response, error);
            } else
                sendError(response, new ApiRequestError(`internal error: ${errorMessage(error)}`, null, 500, "server_error"));
        }
    }

    private async route(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
        const headers = request.headers;
        if (!allowedHostHeader(headers.host, this.host, this.port))
            return this.reject(response, new ApiRequestError("forbidden: this server only answers to localhost names", null, 403, "permission_error"),
                `forbidden Host ${JSON.stringify(headers.host ?? "")}`);
        if (!allowedOrigin(headers.origin, headers.host, this.options.allowedOrigins))
            return this.reject(response, new ApiRequestError("forbidden: browser pages from other origins may not use this server", null, 403, "permission_error"),
                `forbidden Origin ${JSON.stringify(headers.origin ?? "")}`);
        const requested = new URL(request.url ?? "/", "http://localhost").pathname;
        const pathname = withoutV1Aliases.get(requested) ?? requested;
        const method = request.method ?? "GET";
        if (method === "OPTIONS")
            return this.preflight(request, response);
        if (headers.origin !== undefined && (this.options.allowedOrigins ?? []).includes(headers.origin)) {
            response.setHeader("Access-Control-Allow-Origin", headers.origin);
            response.setHeader("Vary", "Origin");
        }

        if (pathname === "/health" || pathname === "/v1/health")
            return this.health(response, method);
        if (pathname === "/metrics" && this.options.metrics !== undefined) {
            requireMethod(method, ["GET", "HEAD"]);
            const {contentType, body} = await this.options.metrics();
            response.writeHead(200, {...baseHeaders, "Content-Type": contentType});
            response.end(method === "HEAD" ? undefined : body);
            return;
        }
        if (pathname.startsWith("/v1/") || pathname.startsWith("/api/") || pathname.startsWith("/slots/") || tokenizerPaths.has(pathname) ||
            llamaCppPaths.has(pathname))
            return await this.api(pathname, method, request, response);
        if (this.dashboard !== undefined)
            return this.dashboard.handle(request, response);
        throw new ApiRequestError(`no route ${method} ${pathname}`, null, 404, "invalid_request_error", "not_found");
    }

    private preflight(request: http.IncomingMessage, response: http.ServerResponse): void {
        const origin = request.headers.origin;
        if (origin === undefined || !(this.options.allowedOrigins ?? []).includes(origin)) {
            response.writeHead(403, baseHeaders).end();
            return;
        }
        response.writeHead(204, {
            ...baseHeaders, "Access-Control-Allow-Origin": origin, "Vary": "Origin",
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS", "Access-Control-Allow-Headers": "Authorization, Content-Type", "Access-Control-Max-Age": "600"
        }).end();
    }

    /** The ready engine and its info for llama.cpp's `/props` and `/slots`: a 503 in llama-server's words while there is none. */
    private engineForProps(): {client: EngineClient, info: EngineInfo} {
        const client = this.readyEngine();
        if (client?.info === undefined)
            throw new ApiRequestError(this.options.engine.current()?.state === "loading" ? "Loading model" : "no model is running", null, 503,
                "unavailable_error", "engine_unavailable");
        return {client, info: client.info};
    }

    private health(response: http.ServerResponse, method: string): void {
        requireMethod(method, ["GET", "HEAD"]);
        const client = this.options.engine.current();
        if (client?.state === "ready") {
            sendJson(response, 200, {status: "ok"});
            return;
        }
        const message = client?.state === "loading" ? "Loading model" : client?.state === "crashed" ? "the engine crashed" : "no model is running";
        sendError(response, new ApiRequestError(message, null, 503, "unavailable_error", client?.state === "loading" ? "model_loading" : "engine_unavailable"));
    }

    private async api(pathname: string, method: string, request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
        let keyName: string | undefined;
        if (this.keys.required) {
            const key = this.keys.check(request.headers.authorization, firstHeader(request.headers["x-api-key"]));
            if (key === undefined)
                return this.reject(response, new ApiRequestError("invalid or missing API key (send Authorization: Bearer KEY)", null, 401,
                    "authentication_error", "invalid_api_key"), "missing or wrong API key");
            keyName = key.name;
        }
        if (pathname === "/v1/models") {
            requireMethod(method, ["GET", "HEAD"]);
            const info = this.readyEngine()?.info;
            const list: ModelList = {object: "list", data: info === undefined ? [] : [modelObject(info)]};
            sendJson(response, 200, list);
            return;
        }
        if (pathname.startsWith("/v1/models/")) {
            requireMethod(method, ["GET", "HEAD"]);
            const info = this.readyEngine()?.info;
            const id = decodedSegment(pathname.slice("/v1/models/".length));
            if (info === undefined || id !== servedModelId(info))
                throw new ApiRequestError(`the model ${JSON.stringify(id).slice(0, 200)} does not exist${info !== undefined ? ` (this server runs ${servedModelId(info)})` : ""}`,
                    "model", 404, "invalid_request_error", "model_not_found");
            sendJson(response, 200, modelObject(info));
            return;
        }
        if (pathname === "/tokenizer_info") {
            requireMethod(method, ["GET", "HEAD"]);
            return await tokenizerInfo(this.readyEngine(), response);
        }
        if (pathname === "/props") {
            requireMethod(method, ["GET", "HEAD"]);
            const {client, info} = this.engineForProps();
            return sendJson(response, 200, await llamaCppProps(client, info, servedModelId(info), this.options.metrics !== undefined));
        }
        if (pathname === "/slots") {
            requireMethod(method, ["GET", "HEAD"]);
            const {client, info} = this.engineForProps();
            const slots = llamaCppSlots(client, info);
            if (new URL(request.url ?? "/", "http://localhost").searchParams.get("fail_on_no_slot") && !hasIdleSlot(slots))
                throw new ApiRequestError("no slot available", null, 503, "unavailable_error", "no_slot_available");
            return sendJson(response, 200, slots);
        }
        if (pathname === "/lora-adapters") {
            requireMethod(method, ["GET", "HEAD", "POST"]);
            const {client, info} = this.engineForProps();
            return sendJson(response, 200, method === "POST" ? await setLoraAdapters(client, info, await readJsonBody(request)) : loraAdapters(info));
        }
        if (pathname.startsWith("/slots/")) {
            requireMethod(method, ["POST"]);
            const directory = this.options.slotSavePath;
            if (directory === undefined)
                throw slotActionsOff();
            const id = parseSlotId(decodedSegment(pathname.slice("/slots/".length)));
            const action = parseSlotAction(new URL(request.url ?? "/", "http://localhost").searchParams.get("action"));
            const target = action === "erase" ? undefined : slotFile(await readJsonBody(request), directory);
            const {client, info} = this.engineForProps();
            return sendJson(response, 200, await runSlotAction(client, info.parallel, id, action, target));
        }
        if (pathname.startsWith("/api/") && !generationPaths.has(pathname))
            return await this.ollamaModels(pathname, method, request, response);
        if (!generationPaths.has(pathname) && !tokenizerPaths.has(pathname) && !llamaCppPaths.has(pathname))
            throw new ApiRequestError(`no route ${method} ${pathname}`, null, 404, "invalid_request_error", "not_found");
        requireMethod(method, ["POST"]);
        const body = await readJsonBody(request);
        // Top-level on llama.cpp's and the OpenAI routes, in `options` on Ollama's.
        if (isObject(body))
            for (const {field, message} of ignoredSamplingFields(isObject(body.options) ? {...body, ...body.options} : body))
                if (!this.reportedIgnored.has(field)) {
                    this.reportedIgnored.add(field);
                    this.options.onIgnoredField?.(message);
                }
        const client = this.readyEngine();
        if (client === undefined || client.info === undefined) {
            const state = this.options.engine.current()?.state;
            throw new ApiRequestError(state === "loading" ? "the model is still loading; retry shortly" : "no model is running", null, 503,
                "server_error", state === "loading" ? "model_loading" : "engine_unavailable");
        }
        // llama-server's per-request adapter scales, on the routes where llama-server reads them.
        const loraScales = isObject(body) && body.lora !== undefined && loraPaths.has(pathname)
            ? requestLoraScales(body.lora, client.info.loraAdapters) : undefined;
        const context = {
            client, info: client.info, modelId: servedModelId(client.info), request, response,
            clientLabel: clientLabel({userAgent: request.headers["user-agent"], title: firstHeader(request.headers["x-title"])}, keyName),
            maxWaiting: this.options.maxWaiting ?? defaultMaxWaiting,
            ssePingIntervalMs: (parseSsePingInterval(body) ?? this.options.ssePingIntervalS ?? defaultSsePingIntervalS) * 1000,
            ...loraScales !== undefined ? {loraScales} : {}
        };
        if (pathname === "/v1/chat/completions")
            await serveChatCompletion(parseChatCompletionRequest(body), context);
        else if (pathname === "/v1/responses")
            await serveResponse(parseResponsesRequest(body), context);
        else if (pathname === "/v1/messages")
            await serveMessages(parseMessagesRequest(body), context);
        else if (pathname === "/v1/messages/count_tokens")
            await countMessageTokens(parseMessagesRequest(body, true), client, response);
        else if (pathname === "/tokenize")
            await tokenize(parseTokenizeRequest(body), client, response);
        else if (pathname === "/detokenize")
            await detokenize(parseDetokenizeRequest(body), client, response);
        else if (pathname === "/apply-template")
            sendJson(response, 200, await applyTemplate(parseChatCompletionRequest(body), client));
        else if (pathname === "/completion" || pathname === "/infill")
            await serveLlamaCompletion(parseLlamaCompletionRequest(body, pathname === "/infill" ? "infill" : "completion"), context);
        else if (pathname === "/api/chat")
            await serveOllama("chat", parseOllamaChatRequest(body), context);
        else if (pathname === "/api/generate")
            await serveOllama("generate", parseOllamaGenerateRequest(body), context);
        else if (pathname === "/v1/embeddings")
            await serveEmbeddings(parseEmbeddingsRequest(body), context);
        else if (pathname === "/api/embed")
            await serveOllamaEmbed(parseOllamaEmbedRequest(body), context);
        else if (pathname === "/api/embeddings")
            await serveOllamaLegacyEmbeddings(parseOllamaLegacyEmbeddingsRequest(body).prompt, context);
        else
            await serveCompletion(parseCompletionRequest(body), context);
    }

    /** Ollama's model routes: the version whose API this server follows, and the one model it runs. */
    private async ollamaModels(pathname: string, method: string, request: http.IncomingMessage, response: http.ServerResponse):
    Promise<void> {
        const info = this.readyEngine()?.info;
        if (pathname === "/api/version") {
            requireMethod(method, ["GET", "HEAD"]);
            return sendJson(response, 200, {version: ollamaApiVersion});
        }
        if (pathname === "/api/tags" || pathname === "/api/ps") {
            requireMethod(method, ["GET", "HEAD"]);
            const entry = pathname === "/api/tags" ? ollamaTagsEntry : ollamaRunningEntry;
            return sendJson(response, 200, {models: info === undefined ? [] : [await entry(info, servedModelId(info))]});
        }
        if (pathname === "/api/show") {
            requireMethod(method, ["POST"]);
            parseOllamaShowRequest(await readJsonBody(request));
            if (info === undefined)
                throw new ApiRequestError("no model is running", "model", 404, "invalid_request_error", "model_not_found");
            return sendJson(response, 200, await ollamaShow(info));
        }
        if (ollamaModelManagement.has(pathname) || pathname.startsWith("/api/blobs/"))
            throw new ApiRequestError(`${pathname} is not served: this server runs the one model file it was started with ` +
                "(start it with another --model, or choose the model in VS Code)", null, 501, "invalid_request_error", "not_implemented");
        throw new ApiRequestError(`no route ${method} ${pathname}`, null, 404, "invalid_request_error", "not_found");
    }

    private readyEngine(): EngineClient | undefined {
        const client = this.options.engine.current();
        return client?.state === "ready" ? client : undefined;
    }
}

/** The loaded model as OpenAI's model object (vLLM's `max_model_len` added). */
function modelObject(info: EngineInfo): ModelList["data"][number] {
    return {id: servedModelId(info), object: "model", created: Math.floor((Date.now() - info.loadMs) / 1000), owned_by: "inference-monitor",
        max_model_len: info.contextSize};
}

/** A percent-encoded path segment, decoded; a malformed one stays as sent (it names no model either way). */
function decodedSegment(segment: string): string {
    try {
        return decodeURIComponent(segment);
    } catch {
        return segment;
    }
}

function firstHeader(value: string | string[] | undefined): string | undefined {
    return Array.isArray(value) ? value[0] : value;
}

function requireMethod(method: string, allowed: readonly string[]): void {
    if (!allowed.includes(method))
        throw new ApiRequestError(`method ${method} not allowed here (use ${allowed.join(" or ")})`, null, 405, "invalid_request_error", "method_not_allowed");
}

function sendJson(response: http.ServerResponse, status: number, body: unknown, extraHeaders: Record<string, string> = {}): void {
    if (response.headersSent) {
        response.end();
        return;
    }
    const text = JSON.stringify(body);
    response.writeHead(status, {...baseHeaders, ...extraHeaders, "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text)});
    response.end(text);
}

/** llama.cpp's server also serves the OpenAI routes without `/v1` (clients configured with the bare address use them). */
const withoutV1Aliases = new Map([["/chat/completions", "/v1/chat/completions"], ["/completions", "/v1/completions"], ["/models", "/v1/models"],
    ["/embeddings", "/v1/embeddings"]]);

/** The routes that send requests to the engine (or count their prompts). */
const generationPaths = new Set(["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens",
    "/v1/embeddings", "/api/chat", "/api/generate", "/api/embed", "/api/embeddings"]);

/** Where llama-server takes a request's `lora`: its completion routes and the OpenAI-compatible generation routes. */
const loraPaths = new Set(["/completion", "/infill", "/v1/completions", "/v1/chat/completions", "/v1/responses"]);

/** Ollama's routes that manage its model store: a server of one model file has none to pull, create or delete. */
const ollamaModelManagement = new Set(["/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete"]);

/** An error in OpenAI's shape, or Anthropic's / Ollama's for their APIs' routes (what their clients parse). */
function sendError(response: http.ServerResponse, error: ApiRequestError): void {
    const pathname = new URL(response.req.url ?? "/", "http://localhost").pathname;
    const body: AnthropicErrorBody | OllamaErrorBody | ReturnType<typeof apiErrorBody> = pathname.startsWith("/v1/messages")
        ? {type: "error", error: {type: anthropicErrorType(error.status), message: error.message}}
        : pathname.startsWith("/api/") ? {error: error.message} : apiErrorBody(error);
    sendJson(response, error.status, body, error.code === "queue_full" ? {"Retry-After": "1"} : {});
}

/** The paths llama.cpp's server and vLLM serve their tokenizer on (outside /v1, as theirs). */
const tokenizerPaths = new Set(["/tokenize", "/detokenize", "/tokenizer_info"]);
/** llama.cpp's server's own completion routes (outside /v1, as its). */
const llamaCppPaths = new Set(["/completion", "/infill", "/props", "/apply-template", "/slots", "/lora-adapters"]);

async function tokenize({input, withPieces, withTokenStrs}: TokenizeRequest, client: EngineClient,
                        response: http.ServerResponse): Promise<void> {
    let result;
    try {
        result = await client.tokenize("messages" in input ? {chat: input} : input, withPieces || withTokenStrs);
    } catch (error) {
        throw new ApiRequestError(`could not tokenize: ${errorMessage(error)}`, null, 400);
    }
    const {tokens, pieces} = result;
    const answer: TokenizeAnswer = {tokens: withPieces ? tokens.map((id, i) => ({id, piece: pieces[i] ?? ""})) : tokens, count: tokens.length,
        max_model_len: client.info?.contextSize ?? 0, ...withTokenStrs ? {token_strs: pieces} : {}};
    sendJson(response, 200, answer);
}

async function tokenizerInfo(client: EngineClient | undefined, response: http.ServerResponse): Promise<void> {
    if (client?.info === undefined)
        throw new ApiRequestError("no model is running", null, 503, "server_error", "engine_unavailable");
    const {bos, eos, addBos, chatTemplate} = await client.tokenizerInfo();
    const answer: TokenizerInfoAnswer = {bos_token: bos ?? null, eos_token: eos ?? null, pad_token: null, add_bos_token: addBos,
        model_max_length: client.info.contextSize, ...chatTemplate !== undefined ? {chat_template: chatTemplate} : {}};
    sendJson(response, 200, answer);
}

async function detokenize(tokens: number[], client: EngineClient, response: http.ServerResponse): Promise<void> {
    let text: string;
    try {
        text = await client.detokenize(tokens);
    } catch (error) {
        throw new ApiRequestError(`tokens: ${errorMessage(error)}`, "tokens", 400);
    }
    const answer: DetokenizeAnswer = {content: text, prompt: text};
    sendJson(response, 200, answer);
}

/** Anthropic's `count_tokens`: the prompt the same request would be served with, rendered by the engine. */
async function countMessageTokens({messages, tools, continueFinalMessage}: MessagesRequest, client: EngineClient,
                                  response: http.ServerResponse): Promise<void> {
    let count: number;
    try {
        const chat = {messages, ...tools !== undefined ? {tools} : {}, ...continueFinalMessage !== undefined ? {continueFinalMessage} : {}};
        count = (await client.tokenize({chat})).tokens.length;
    } catch (error) {
        throw new ApiRequestError(`could not render the prompt: ${errorMessage(error)}`, null, 400);
    }
    sendJson(response, 200, {input_tokens: count});
}

/**
 * Reads a JSON body of at most `maxRequestBodyBytes`: 413 above it (declared or as it arrives; the
 * rest is drained, not buffered), 400 when it is not JSON.
 */
async function readJsonBody(request: http.IncomingMessage): Promise<unknown> {
    const declared = Number(request.headers["content-length"]);
    const tooLarge = (): ApiRequestError =>
        new ApiRequestError(`the request body is larger than ${maxRequestBodyBytes} bytes (1 MiB), the most this server accepts`, null, 413);
    if (Number.isFinite(declared) && declared > maxRequestBodyBytes) {
        request.resume();
        throw tooLarge();
    }
    const text = await new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let size = 0;
        request.on("data", (chunk: Buffer) => {
            size += chunk.length;
            if (size > maxRequestBodyBytes) {
                chunks.length = 0;
                reject(tooLarge());
            } else
                chunks.push(chunk);
        });
        request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        request.on("error", reject);
    });
    try {
        return JSON.parse(text) as unknown;
    } catch (error) {
        throw new ApiRequestError(`the request body is not valid JSON: ${errorMessage(error)}`, null, 400);
    }
}
