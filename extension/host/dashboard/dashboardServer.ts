/**
 * The headless dashboard: the stats panel served to a plain browser, speaking webview/protocol.ts
 * over a WebSocket instead of VS Code's webview messaging. One HTTP server on 127.0.0.1:
 *
 *   GET /              the panel page (renderPanelHtml, WebSocket transport, nonce CSP)
 *   GET /panel.js …    the bundle's files, only from `webviewDir` (dist/webview)
 *   GET /export.json   the full stats snapshot, as a download
 *   GET /export.csv    the time series, one row per sample, as a download
 *   GET /export-requests.csv  one row per recent request (metrics in ms), as a download
 *   GET /metrics       the Prometheus exposition, when `metrics` is given (`watch`, `proxy`)
 *   WS  /stream        the panel protocol: `ready` → snapshot, then deltas at ≤ 4 Hz; `setPaused`,
 *                      `requestSnapshot`, `reset`, `export` (answered with `exportResult` carrying the
 *                      content, which the page offers as a download)
 *
 * Each client gets a PanelSession (extension/host/panel: the same host end the VS Code panel uses). Client messages are
 * validated (parsePanelToHost) and capped at `maxPanelMessageBytes`; bad ones are dropped and
 * counted in `rejectedCount`. Browsers may only connect from this server's own
 * origin, and only under a loopback Host name (no cross-site or DNS-rebinding access to the stats).
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import {WebSocket, WebSocketServer} from "ws";
import {renderPanelHtml, makeNonce, panelCsp} from "../panel/panelHtml.js";
import {encodeMessage, maxPanelMessageBytes} from "../../../protocol/panelMessages.js";
import {PanelSession, type PanelStatsSource} from "../panel/panelSession.js";
import type {MetricsBody} from "../stats/loggers/metricsHttpServer.js";
import {exportStats, requestsCsv} from "../stats/statsExport.js";
import {listen} from "../net/listen.js";
import {rawDataToString} from "../net/rawData.js";
import {allowedHostHeader, allowedOrigin} from "../net/hostCheck.js";

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
    /** A client whose socket has more than this many bytes buffered misses deltas (then asks for a snapshot). Default 4 MiB. */
    maxBufferedBytes?: number,
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

/** One of the dashboard's `choices`. */
export type NamedStatsSource = {key: string, label: string, source: DashboardStatsSource};

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

export class DashboardServer {
    /** Client messages dropped: malformed, unknown, binary, or over the size cap. */
    rejectedCount = 0;
    private readonly clients = new Set<{socket: WebSocket, session: PanelSession}>();
    private readonly maxBufferedBytes: number;
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
        this.maxBufferedBytes = options.maxBufferedBytes ?? 4 << 20;
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

    /** The page's URL. */
    get url(): string {
        return `http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}/`;
    }

    /** The WebSocket endpoint. */
    get streamUrl(): string {
        return `${this.url.replace(/^http/, "ws")}stream`;
    }

    get clientCount(): number {
        return this.clients.size;
    }

    async close(): Promise<void> {
        if (this.closed)
            return;
        this.closed = true;
        for (const client of this.clients) {
            client.session.dispose();
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
            verifyClient: ({origin, req}: {origin: string | undefined, req: http.IncomingMessage}) => this.allowedHost(req.headers.host)
                && allowedOrigin(origin, req.headers.host)
        });
        this.wss.on("error", (error) => {
            this.rejectedCount++;
            this.options.onRejected?.(`websocket server: ${error.message}`);
        });
        this.wss.on("connection", (socket) => this.onConnection(socket));
    }

    private onConnection(socket: WebSocket): void {
        const options = this.options;
        // What this browser shows: its own pick among the choices, if any.
        const list = options.choices;
        let selectedKey = list?.()[0]?.key;
        const current = (): DashboardStatsSource => list?.().find((choice) => choice.key === selectedKey)?.source ?? options.source;
        const source: DashboardStatsSource = {
            snapshot: () => current().snapshot(),
            subscribe: (listener, subscribeOptions) => current().subscribe(listener, subscribeOptions),
            reset: () => current().reset()
        };
        const session = new PanelSession({
            source,
            ...(list !== undefined ? {choices: {
                list: () => list().map(({key, label}) => ({key, label})),
                selected: () => selectedKey ?? "",
                select: (key: string) => {
                    selectedKey = key;
                }
            }} : {}),
            send: (message) => {
                if (socket.readyState === WebSocket.OPEN)
                    socket.send(encodeMessage(message));
            },
            // The browser gets the export's content and offers it as a download.
            exportStats: (format) => {
                const exported = exportStats(source.snapshot(), format);
                return {format, fileName: exported.fileName, mimeType: exported.mimeType, content: exported.content};
            },
            // A slow client misses deltas; the seq gap makes it ask for a snapshot.
            canSend: () => socket.bufferedAmount <= this.maxBufferedBytes,
            ...(options.maxHz !== undefined ? {maxHz: options.maxHz} : {}),
            ...(options.engineStartedAt !== undefined ? {engineStartedAt: options.engineStartedAt} : {}),
            onRejected: (reason) => {
                this.rejectedCount++;
                options.onRejected?.(reason);
            }
        });
        const client = {socket, session};
        this.clients.add(client);
        socket.on("message", (data, isBinary) => {
            if (isBinary)
                session.reject("binary message");
            else
                session.receive(rawDataToString(data));
        });
        // ws reports an oversized or malformed frame here, then closes the socket.
        socket.on("error", (error) => session.reject(`client socket: ${error.message}`));
        socket.on("close", () => {
            session.dispose();
            this.clients.delete(client);
        });
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
        if (pathname === "/export.json" || pathname === "/export.csv" || pathname === "/export-requests.csv") {
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
