/**
 * The headless dashboard: the stats panel served to a plain browser, speaking webview/protocol.ts
 * over a WebSocket instead of VS Code's webview messaging. One HTTP server on 127.0.0.1:
 *
 *   GET /?token=T      the panel page (renderPanelHtml, WebSocket transport, nonce CSP); 401 without T
 *   GET /panel.js …    the bundle's files, only from `webviewDir` (dist/webview)
 *   GET /export.json?token=T   the full stats snapshot, as a download
 *   GET /export.csv?token=T    the time series, one row per sample, as a download
 *   GET /export-requests.csv?token=T  one row per recent request (metrics in ms), as a download
 *   GET /metrics       the Prometheus exposition, when `metrics` is given (`watch`, `proxy`); no token
 *                      (read-only, and scrapers expect none)
 *   WS  /stream?token=T  the panel protocol: `ready` → snapshot, then deltas at ≤ 4 Hz; `setPaused`,
 *                      `requestSnapshot`, `reset`, `export` (answered with `exportResult` carrying the
 *                      content, which the page offers as a download)
 *
 * T is this run's access token (accessToken.ts): made at start, part of `url` (what the CLI prints);
 * the page reads it from its address and sends it on `/stream`. Without it `/stream` answers 401, so
 * other local processes can neither read nor reset the stats.
 *
 * Each client is a DashboardViewer (dashboardViewer.ts) with a PanelSession (extension/host/panel: the
 * same host end the VS Code panel uses). Client messages are validated (parsePanelToHost) and capped at
 * `maxPanelMessageBytes`; bad ones are dropped and counted in `rejectedCount`. Browsers may only connect
 * from this server's own origin, and only under a loopback Host name (no cross-site or DNS-rebinding
 * access to the stats).
 *
 * A client cannot make the host hoard memory or time: what it has not read is capped and what it asks
 * for is rate-limited (dashboardViewer.ts); at most `maxConnections` clients (503 beyond); a client that
 * does not answer a ping by the next one is cut off, and a connection that sends no request within
 * `requestTimeoutMs` is closed.
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import {WebSocket, WebSocketServer} from "ws";
import {renderPanelHtml, makeNonce, panelCsp} from "../panel/panelHtml.js";
import {maxPanelMessageBytes} from "../../../protocol/panelMessages.js";
import type {PanelStatsSource} from "../panel/panelSession.js";
import type {MetricsBody} from "../stats/loggers/metricsHttpServer.js";
import {exportStats, requestsCsv} from "../stats/statsExport.js";
import {listen} from "../net/listen.js";
import {allowedHostHeader, allowedOrigin} from "../net/hostCheck.js";
import {makeAccessToken, requestHasToken, tokenParameter} from "./accessToken.js";
import {DashboardViewer, type NamedStatsSource, type ViewerHost} from "./dashboardViewer.js";
import {closeConnectionsWithoutRequest} from "./firstRequestTimeout.js";
import type {RateLimit} from "./tokenBucket.js";

export {slowClientCloseCode, type NamedStatsSource} from "./dashboardViewer.js";

/** What the dashboard shows: StatsManager fits. */
export type DashboardStatsSource = PanelStatsSource;

export type DashboardServerOptions = {
    /** TCP port; 0 (default) = a free one. */
    port?: number,
    /** Interface to bind. Default "127.0.0.1". Anything but loopback exposes the stats to the network. */
    host?: string,
    source: DashboardStatsSource,
    /** The built panel (dist/webview: panel.js, panel.css). */
    webviewDir: string,
    /** Deltas per second per client at most. Default 4. */
    maxHz?: number,
    /** When the engine started (epoch ms), for the panel's uptime; default: the panel estimates it. */
    engineStartedAt?: () => number | undefined,
    /**
     * Checked before every message to a client: with more than this many bytes it has not read, a delta
     * is skipped (the panel then asks for a snapshot) and any other message closes the client (1013).
     * Default 4 MiB.
     */
    maxBufferedBytes?: number,
    /** `/stream` clients at once; more are refused with 503. Default 32. */
    maxConnections?: number,
    /** Per client: `ready`, `requestSnapshot` and `selectSource` (each makes a snapshot). Default burst 8, then 2 per second. */
    snapshotRate?: RateLimit,
    /** Per client: `export`. Default burst 3, then one per 2 s. */
    exportRate?: RateLimit,
    /** A ping to every client this often; one that has not answered the last ping is cut off. Default 30 s. */
    pingIntervalMs?: number,
    /** A connection that has not sent a complete request (or upgrade) this long after connecting is closed. Default 10 s. */
    requestTimeoutMs?: number,
    /** A client closed for unread data is cut off if it has not finished closing this long after. Default 2 s. */
    closeGraceMs?: number,
    /**
     * Several things to show (`watch`: all servers merged, then each one): every browser picks its own
     * in the page's header, starting with the first. `source` is then only the fallback.
     */
    choices?: () => NamedStatsSource[],
    /** Renders `/metrics` on the dashboard's port (`watch`, `proxy`); absent = 404. */
    metrics?: () => Promise<MetricsBody>,
    /** Page title. Default "Inference Monitor". */
    title?: string,
    /** Where dropped client messages and socket errors are reported. Default: nowhere (they are counted). */
    onRejected?: (reason: string) => void
};

export const dashboardDefaults = {
    maxBufferedBytes: 4 << 20,
    maxConnections: 32,
    snapshotRate: {burst: 8, perSecond: 2},
    exportRate: {burst: 3, perSecond: 0.5},
    pingIntervalMs: 30_000,
    requestTimeoutMs: 10_000,
    closeGraceMs: 2000
} as const satisfies Partial<DashboardServerOptions>;

export class DashboardServerError extends Error {
    override readonly name = "DashboardServerError";
}

const contentTypes: Record<string, string> = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".map": "application/json; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2"
};

const exportPaths = new Set(["/export.json", "/export.csv", "/export-requests.csv"]);

export class DashboardServer {
    /** Client messages dropped: malformed, unknown, binary, or over the size cap. */
    rejectedCount = 0;
    /** Client messages dropped for going over their rate (`snapshotRate`, `exportRate`). */
    rateLimitedCount = 0;
    /** Clients closed for not reading what they were sent (over `maxBufferedBytes`). */
    slowClientCount = 0;
    /** `/stream` upgrades refused: foreign Host or Origin (403), no or wrong token (401), too many clients (503). */
    refusedCount = 0;
    /** Connections closed for silence: no pong (`pingIntervalMs`) or no request (`requestTimeoutMs`). */
    timedOutCount = 0;
    /** This run's access token (see accessToken.ts). */
    readonly token = makeAccessToken();
    private readonly clients = new Set<DashboardViewer>();
    private readonly viewerHost: ViewerHost;
    private keepalive: NodeJS.Timeout | undefined;
    private wss!: WebSocketServer;
    private rootDir!: string;
    private closed = false;

    private constructor(
        private readonly options: DashboardServerOptions,
        private readonly server: http.Server,
        readonly host: string,
        readonly port: number,
        /** Whether this object created the HTTP server (and closes it) or was mounted on another's. */
        private readonly ownsServer: boolean
    ) {
        this.viewerHost = {
            source: options.source,
            ...(options.choices !== undefined ? {choices: options.choices} : {}),
            ...(options.maxHz !== undefined ? {maxHz: options.maxHz} : {}),
            ...(options.engineStartedAt !== undefined ? {engineStartedAt: options.engineStartedAt} : {}),
            maxBufferedBytes: options.maxBufferedBytes ?? dashboardDefaults.maxBufferedBytes,
            snapshotRate: options.snapshotRate ?? dashboardDefaults.snapshotRate,
            exportRate: options.exportRate ?? dashboardDefaults.exportRate,
            closeGraceMs: options.closeGraceMs ?? dashboardDefaults.closeGraceMs,
            countRejected: (reason) => {
                this.rejectedCount++;
                options.onRejected?.(reason);
            },
            countRateLimited: () => {
                this.rateLimitedCount++;
            },
            countSlowClient: (reason) => {
                this.slowClientCount++;
                options.onRejected?.(reason);
            },
            report: (reason) => options.onRejected?.(reason),
            forget: (viewer) => {
                this.clients.delete(viewer);
            }
        };
    }

    /** Starts serving; rejects with PortInUseError (net/listen.ts) when the port is taken. */
    static async listen(options: DashboardServerOptions): Promise<DashboardServer> {
        const host = options.host ?? "127.0.0.1";
        const requestedPort = options.port ?? 0;
        if (!Number.isInteger(requestedPort) || requestedPort < 0 || requestedPort > 65535)
            throw new DashboardServerError(`port must be an integer 0..65535, got ${requestedPort}`);
        const rootDir = await fs.promises.realpath(options.webviewDir).catch(() => {
            throw new DashboardServerError(`webviewDir ${options.webviewDir} does not exist (build the panel first: npm run build)`);
        });
        let dashboard: DashboardServer | undefined;
        const server = http.createServer((request, response) => {
            if (dashboard === undefined)
                response.writeHead(503).end();
            else
                dashboard.handle(request, response);
        });
        closeConnectionsWithoutRequest(server, options.requestTimeoutMs ?? dashboardDefaults.requestTimeoutMs, () => {
            if (dashboard !== undefined)
                dashboard.timedOutCount++;
        });
        const {port} = await listen(server, {host, port: requestedPort, purpose: "Dashboard"});
        dashboard = new DashboardServer(options, server, host, port, true);
        dashboard.rootDir = rootDir;
        dashboard.attachWebSocket();
        return dashboard;
    }

    /**
     * Serves the dashboard on a server someone else runs (the OpenAI-compatible endpoint puts it at
     * `/` of its port): it answers the requests handed to `handle` and the WebSocket at `/stream`.
     */
    static async mount(server: http.Server, address: {host: string, port: number},
        options: DashboardServerOptions): Promise<DashboardServer> {
        const rootDir = await fs.promises.realpath(options.webviewDir).catch(() => {
            throw new DashboardServerError(`webviewDir ${options.webviewDir} does not exist (build the panel first: npm run build)`);
        });
        const dashboard = new DashboardServer(options, server, address.host, address.port, false);
        dashboard.rootDir = rootDir;
        dashboard.attachWebSocket();
        return dashboard;
    }

    /** Answers one HTTP request (the page, its files, the exports; 404 otherwise). */
    handle(request: http.IncomingMessage, response: http.ServerResponse): void {
        this.handleHttp(request, response).catch(() => {
            if (!response.headersSent)
                response.writeHead(500);
            response.end();
        });
    }

    /** The page's URL, with this run's token: the one to print or open. */
    get url(): string {
        return `${this.baseUrl}?${tokenParameter}=${this.token}`;
    }

    /** `http://HOST:PORT/`, no token (`/metrics` is under it). */
    get baseUrl(): string {
        return `http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}/`;
    }

    /** The WebSocket endpoint, with this run's token. */
    get streamUrl(): string {
        return `${this.baseUrl.replace(/^http/, "ws")}stream?${tokenParameter}=${this.token}`;
    }

    get clientCount(): number {
        return this.clients.size;
    }

    /** Bytes the host holds for `/stream` sockets that they have not read yet, all of them (closing ones too). */
    get bufferedBytes(): number {
        let sum = 0;
        for (const socket of this.wss.clients)
            sum += socket.bufferedAmount;
        return sum;
    }

    async close(): Promise<void> {
        if (this.closed)
            return;
        this.closed = true;
        clearInterval(this.keepalive);
        for (const client of [...this.clients]) {
            client.drop();
            client.socket.terminate();
        }
        this.clients.clear();
        await new Promise<void>((resolve) => this.wss.close(() => resolve()));
        if (!this.ownsServer)
            return;
        this.server.closeAllConnections();
        await new Promise<void>((resolve) => this.server.close(() => resolve()));
    }

    // ---- WebSocket ------------------------------------------------------------------------------

    private attachWebSocket(): void {
        this.wss = new WebSocketServer({
            server: this.server, path: "/stream", maxPayload: maxPanelMessageBytes,
            verifyClient: ({origin, req}: {origin: string | undefined, req: http.IncomingMessage},
                done: (accept: boolean, code?: number, message?: string) => void) => {
                const refuse = (code: number, why: string): void => {
                    this.refusedCount++;
                    this.options.onRejected?.(`/stream refused (${code}): ${why}`);
                    done(false, code, why);
                };
                if (!this.allowedHost(req.headers.host) || !allowedOrigin(origin, req.headers.host))
                    return refuse(403, "forbidden Host or Origin");
                if (!requestHasToken(req.url, this.token))
                    return refuse(401, "missing or wrong token: open the dashboard URL printed when the server started");
                const max = this.options.maxConnections ?? dashboardDefaults.maxConnections;
                if (this.clients.size >= max)
                    return refuse(503, `too many dashboard connections (at most ${max}); close another tab`);
                done(true);
            }
        });
        this.wss.on("error", (error) => {
            this.rejectedCount++;
            this.options.onRejected?.(`websocket server: ${error.message}`);
        });
        this.wss.on("connection", (socket) => {
            this.clients.add(new DashboardViewer(socket, this.viewerHost));
        });
        this.keepalive = setInterval(() => this.pingClients(), this.options.pingIntervalMs ?? dashboardDefaults.pingIntervalMs);
        this.keepalive.unref();
    }

    /** Cuts off clients that did not answer the last ping; pings the others. */
    private pingClients(): void {
        for (const client of [...this.clients]) {
            if (client.socket.readyState !== WebSocket.OPEN)
                continue;
            if (!client.alive) {
                this.timedOutCount++;
                this.options.onRejected?.("a /stream client did not answer a ping: cut off");
                client.drop();
                client.socket.terminate();
                continue;
            }
            client.alive = false;
            client.socket.ping();
        }
    }

    // ---- HTTP -----------------------------------------------------------------------------------

    /** Loopback binds answer only to loopback Host names (DNS rebinding); other binds to any. */
    private allowedHost(hostHeader: string | undefined): boolean {
        return allowedHostHeader(hostHeader, this.host, this.port);
    }

    private async handleHttp(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
        const baseHeaders = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"};
        const fail = (status: number, text: string): void => {
            response.writeHead(status, {...baseHeaders, "Content-Type": "text/plain; charset=utf-8"});
            response.end(`${text}\n`);
        };
        if (!this.allowedHost(request.headers.host))
            return fail(403, "forbidden host");
        if (request.method !== "GET" && request.method !== "HEAD") {
            response.setHeader("Allow", "GET, HEAD");
            return fail(405, "method not allowed");
        }
        let pathname: string;
        try {
            pathname = decodeURIComponent(new URL(request.url ?? "/", "http://localhost").pathname);
        } catch {
            return fail(400, "bad request");
        }
        const needsToken = pathname === "/" || pathname === "/index.html" || exportPaths.has(pathname);
        if (needsToken && !requestHasToken(request.url, this.token))
            return fail(401, "this dashboard needs its access token: open the URL (with ?token=…) printed when it started");
        if (pathname === "/" || pathname === "/index.html") {
            const nonce = makeNonce();
            const transport = {kind: "websocket" as const, url: `ws://${request.headers.host}/stream`};
            const html = renderPanelHtml({scriptUri: "/panel.js", styleUri: "/panel.css", cspSource: "'self'", nonce, transport, ...(this.options.title !== undefined ? {title: this.options.title} : {})});
            response.writeHead(200, {
                ...baseHeaders, "Content-Type": "text/html; charset=utf-8",
                "Content-Security-Policy": `${panelCsp({cspSource: "'self'", nonce, transport})}; frame-ancestors 'none'`
            });
            response.end(request.method === "HEAD" ? undefined : html);
            return;
        }
        if (pathname === "/metrics" && this.options.metrics !== undefined) {
            const {contentType, body} = await this.options.metrics();
            response.writeHead(200, {...baseHeaders, "Content-Type": contentType});
            response.end(request.method === "HEAD" ? undefined : body);
            return;
        }
        if (exportPaths.has(pathname)) {
            const snapshot = this.options.source.snapshot();
            const exported = pathname === "/export-requests.csv"
                ? {fileName: "inference-monitor-requests.csv", mimeType: "text/csv", content: requestsCsv(snapshot.requests)}
                : exportStats(snapshot, pathname.endsWith("json") ? "json" : "csv");
            response.writeHead(200, {...baseHeaders, "Content-Type": exported.mimeType, "Content-Disposition": `attachment; filename="${exported.fileName}"`});
            response.end(request.method === "HEAD" ? undefined : exported.content);
            return;
        }
        const file = await this.staticFile(pathname);
        if (file === undefined)
            return fail(404, "not found");
        response.writeHead(200, {...baseHeaders, "Content-Type": contentTypes[path.extname(file).toLowerCase()] ?? "application/octet-stream"});
        if (request.method === "HEAD") {
            response.end();
            return;
        }
        fs.createReadStream(file).on("error", () => response.destroy()).pipe(response);
    }

    /** The real path of a regular file inside webviewDir, or undefined (missing, a folder, or outside it). */
    private async staticFile(pathname: string): Promise<string | undefined> {
        if (pathname.includes("\0"))
            return undefined;
        const candidate = path.resolve(this.rootDir, `.${path.posix.normalize(pathname)}`);
        try {
            const real = await fs.promises.realpath(candidate);
            if (!real.startsWith(this.rootDir + path.sep))
                return undefined;
            return (await fs.promises.stat(real)).isFile() ? real : undefined;
        } catch {
            return undefined;
        }
    }
}
