/**
 * The monitoring proxy: a reverse proxy on 127.0.0.1 in front of any OpenAI-compatible server (and
 * Ollama's `/api/*`) that forwards every request and response unchanged — bytes passed on as they
 * arrive, SSE not held back — and measures each generation request on the way (ProxyStats), so any
 * backend gets the per-request lifecycle the panel shows for our own engine.
 *
 *   /v1/*, /api/*, and llama.cpp's own routes (/completion, /completions, /infill, /tokenize, /detokenize, /props, /health)
 *             forwarded to the upstream (same method, path, query, headers but the hop-by-hop ones)
 *   measured: POST /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages, /api/generate, /api/chat,
 *             llama.cpp's /completion, /completions and /infill (llama.vscode's), and
 *             embeddings: /v1/embeddings, /api/embed, /api/embeddings (their prompt tokens; no output tokens)
 *
 * The client disconnecting aborts the upstream request (recorded `abort`); an upstream that cannot be
 * reached gives a 502 in OpenAI's error shape (recorded `error`). Host and Origin are checked like our
 * other servers': a loopback bind answers only to loopback names, browser pages only from allow-listed origins.
 */
import http from "node:http";
import https from "node:https";
import {errorMessage} from "../../../common/errorMessage.js";
import {apiErrorBody, ApiRequestError} from "../../../protocol/openaiFields.js";
import {listen} from "../net/listen.js";
import {allowedHostHeader, allowedOrigin} from "../net/hostCheck.js";
import {clientLabel} from "../openai/clientLabel.js";
import type {ProxiedEnd, ProxyStats} from "./proxyStats.js";
import {createTap, tapFormat} from "./responseTap.js";

export type MonitoringProxyOptions = {
    /** Base URL of the server behind the proxy, e.g. `http://127.0.0.1:8080`. */
    upstream: string,
    stats: ProxyStats,
    /** Default 0 (a free one). */
    port?: number,
    /** Default 127.0.0.1. */
    host?: string,
    /** Browser origins that may use the proxy. */
    allowedOrigins?: readonly string[],
    /** The upstream answered (true) or could not be reached (false, with why). */
    onUpstream?: (reachable: boolean, error?: string) => void
};

const measuredPaths = new Set(["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/api/generate", "/api/chat",
    "/v1/embeddings", "/api/embed", "/api/embeddings", "/completion", "/completions", "/infill"]);
/** llama.cpp's server's own routes outside /v1, forwarded as they are. */
const llamaCppPaths = new Set(["/completion", "/completions", "/infill", "/tokenize", "/detokenize", "/props", "/apply-template", "/slots",
    "/health"]);
/** Resends over a fresh connection when a kept-alive one was closed under us: at most this often, bodies up to this size. */
const maxAttempts = 8;
const maxReplayBytes = 8 << 20;
const hopByHop = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host"]);

export class MonitoringProxy {
    private readonly upstream: URL;
    private readonly agent: http.Agent;

    private constructor(
        private readonly options: MonitoringProxyOptions, private readonly server: http.Server, readonly host: string, readonly port: number
    ) {
        this.upstream = new URL(options.upstream);
        this.agent = this.upstream.protocol === "https:" ? new https.Agent({keepAlive: true}) : new http.Agent({keepAlive: true});
    }

    /** Starts listening; rejects with PortInUseError when the port is taken, or a RangeError for a bad upstream. */
    static async listen(options: MonitoringProxyOptions): Promise<MonitoringProxy> {
        const upstream = new URL(options.upstream);
        if (upstream.protocol !== "http:" && upstream.protocol !== "https:")
            throw new RangeError(`the upstream must be an http or https URL, got ${options.upstream}`);
        const host = options.host ?? "127.0.0.1";
        let proxy: MonitoringProxy | undefined;
        const server = http.createServer((request, response) => {
            if (proxy === undefined)
                response.writeHead(503).end();
            else
                proxy.handle(request, response);
        });
        const {port} = await listen(server, {host, port: options.port ?? 0, purpose: "Monitoring proxy"});
        proxy = new MonitoringProxy(options, server, host, port);
        return proxy;
    }

    /** What tools use instead of the upstream: `http://127.0.0.1:PORT`. */
    get url(): string {
        return `http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}`;
    }

    async close(): Promise<void> {
        this.server.closeAllConnections();
        await new Promise<void>((resolve) => this.server.close(() => resolve()));
        this.agent.destroy();
    }

    private handle(request: http.IncomingMessage, response: http.ServerResponse): void {
        const headers = request.headers;
        if (!allowedHostHeader(headers.host, this.host, this.port))
            return fail(response, new ApiRequestError("forbidden: this proxy only answers to localhost names", null, 403, "permission_error"));
        if (!allowedOrigin(headers.origin, headers.host, this.options.allowedOrigins))
            return fail(response, new ApiRequestError("forbidden: browser pages from other origins may not use this proxy", null, 403, "permission_error"));
        const url = new URL(request.url ?? "/", "http://localhost");
        if (!url.pathname.startsWith("/v1/") && !url.pathname.startsWith("/api/") && !llamaCppPaths.has(url.pathname))
            return fail(response, new ApiRequestError(`the proxy forwards /v1/*, /api/* and llama.cpp's own routes only, not ${url.pathname}`, null, 404,
                "invalid_request_error", "not_found"));
        const measured = request.method === "POST" && measuredPaths.has(url.pathname);
        const stats = this.options.stats;
        const id = measured ? stats.arrive(clientLabel({userAgent: headers["user-agent"], title: single(headers["x-title"])})) : undefined;
        let ended = false;
        const end = (outcome: ProxiedEnd) => {
            if (id !== undefined && !ended) {
                ended = true;
                stats.finish(id, outcome);
            }
        };

        const target = new URL(url.pathname + url.search, this.upstream);
        const forwardHeaders: http.OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(headers))
            if (!hopByHop.has(name) && value !== undefined)
                forwardHeaders[name] = value;
        forwardHeaders.host = this.upstream.host;
        const client = this.upstream.protocol === "https:" ? https : http;
        const requestOptions: http.RequestOptions = {method: request.method, headers: forwardHeaders, agent: this.agent};
        // A copy of the body, to send it again when a kept-alive connection turns out to be closed
        // (llama-server closes its connection after every streamed answer): only before any answer came.
        const body: Buffer[] = [];
        let bodyBytes = 0;
        let bodyComplete = false;
        let current: http.ClientRequest;
        const attempt = (attemptNo: number): http.ClientRequest => {
            const upstreamRequest = client.request(target, requestOptions,
                (upstreamResponse) => this.relay(upstreamResponse, response, id, end));
            upstreamRequest.on("error", (error) => {
                const code = (error as NodeJS.ErrnoException).code;
                const staleSocket = upstreamRequest.reusedSocket && (code === "ECONNRESET" || code === "EPIPE");
                if (staleSocket && !response.headersSent && bodyBytes <= maxReplayBytes && attemptNo < maxAttempts && !response.destroyed) {
                    const resend = () => {
                        current = attempt(attemptNo + 1);
                        for (const chunk of body)
                            current.write(chunk);
                        current.end();
                    };
                    if (bodyComplete) resend();
                    else request.once("end", resend);
                    return;
                }
                if (!response.headersSent) {
                    this.options.onUpstream?.(false, errorMessage(error));
                    fail(response, new ApiRequestError(`the upstream ${this.upstream.origin} could not be reached: ${errorMessage(error)}`,
                        null, 502, "server_error", "upstream_unreachable"));
                } else
                    response.destroy();
                end({reason: "error", promptTokens: undefined, completionTokens: undefined, error: `upstream: ${errorMessage(error)}`});
            });
            return upstreamRequest;
        };
        current = attempt(1);
        const first = current;
        request.on("data", (chunk: Buffer) => {
            bodyBytes += chunk.length;
            if (bodyBytes <= maxReplayBytes)
                body.push(chunk);
            if (current === first)
                first.write(chunk);
        });
        request.on("end", () => {
            bodyComplete = true;
            if (current === first)
                first.end();
        });
        // The client went away before the answer ended: stop the upstream work too.
        response.on("close", () => {
            if (!response.writableFinished) {
                current.destroy();
                end({reason: "abort", promptTokens: undefined, completionTokens: undefined});
            }
        });
    }

    /** Passes the upstream's answer on as it arrives, reading generation answers on the way. */
    private relay(upstreamResponse: http.IncomingMessage, response: http.ServerResponse, id: string | undefined,
        end: (outcome: ProxiedEnd) => void): void {
        const stats = this.options.stats;
        this.options.onUpstream?.(true);
        const status = upstreamResponse.statusCode ?? 502;
        const responseHeaders: http.OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(upstreamResponse.headers))
            if (!hopByHop.has(name) && value !== undefined)
                responseHeaders[name] = value;
        response.writeHead(status, upstreamResponse.statusMessage, responseHeaders);
        response.flushHeaders();
        const format = tapFormat(upstreamResponse.headers["content-type"]);
        const tap = id !== undefined && status < 400 ? createTap(format, (text) => stats.text(id, text)) : undefined;
        const errorBody: Buffer[] = [];
        upstreamResponse.on("data", (chunk: Buffer) => {
            response.write(chunk);
            if (tap !== undefined)
                tap.write(chunk);
            else if (status >= 400 && errorBody.length < 64)
                errorBody.push(chunk);
        });
        upstreamResponse.on("end", () => {
            response.end();
            if (tap === undefined) {
                end({reason: "error", promptTokens: undefined, completionTokens: undefined,
                    error: `HTTP ${status} from the upstream: ${Buffer.concat(errorBody).toString("utf8").slice(0, 300)}`,
                    errorCode: status < 500 ? "invalid_request" : "engine_error"});
                return;
            }
            const said = tap.end();
            end({
                reason: said.error !== undefined ? "error" : said.finishReason === "length" ? "length" : "stop",
                promptTokens: said.promptTokens, completionTokens: said.completionTokens,
                ...(said.error !== undefined ? {error: said.error, errorCode: "engine_error" as const} : {})
            });
        });
        upstreamResponse.on("error", (error) => {
            response.destroy();
            end({reason: "error", promptTokens: undefined, completionTokens: undefined, error: `the upstream stream broke: ${errorMessage(error)}`});
        });
    }
}

function fail(response: http.ServerResponse, error: ApiRequestError): void {
    const body = JSON.stringify(apiErrorBody(error));
    response.writeHead(error.status, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), "X-Content-Type-Options": "nosniff"});
    response.end(body);
}

function single(value: string | string[] | undefined): string | undefined {
    return Array.isArray(value) ? value[0] : value;
}
