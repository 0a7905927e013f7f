/**
 * How the panel talks to its host — the same bundle in both places:
 * - inside VS Code: `acquireVsCodeApi().postMessage` out, window `message` events in;
 * - in a plain browser (the headless dashboard): a WebSocket to the URL in the page's config, with
 *   the access token from the page's own address (`?token=…`, as the server printed it) added,
 *   reconnecting with backoff; every (re)connection is announced to the panel as `open`.
 * Transports deliver raw data; the panel validates it (protocol.ts).
 */
import {encodeMessage, type PanelToHost} from "../protocol/panelMessages.js";
import type {PanelTransportConfig} from "../protocol/panelConfig.js";

export type ConnectionStatus = "connecting" | "open" | "closed";

export type TransportHandlers = {
    /** The channel is (again) up: the panel sends `ready`. */
    open(): void,
    /** A message from the host, unvalidated (an object from VS Code, a string from a WebSocket). */
    message(raw: unknown): void,
    status(status: ConnectionStatus): void
};

export interface PanelTransport {
    readonly kind: "vscode" | "websocket",
    send(message: PanelToHost): void,
    dispose(): void
}

type VsCodeApi = {postMessage(message: unknown): void};
declare const acquireVsCodeApi: (() => VsCodeApi) | undefined;

export class TransportError extends Error {
    override readonly name = "TransportError";
}

/** VS Code's API when this page runs in a webview, else the WebSocket from the config. */
export function createTransport(config: PanelTransportConfig, handlers: TransportHandlers): PanelTransport {
    if (typeof acquireVsCodeApi === "function")
        return new VsCodeTransport(acquireVsCodeApi(), handlers);
    if (config.kind === "websocket")
        return new WebSocketTransport(withPageToken(config.url, window.location.search), handlers);
    throw new TransportError("this page expects to run in a VS Code webview, but acquireVsCodeApi is not available");
}

/** The dashboard's access token travels in the page's query (`?token=…`); `/stream` wants it too. */
export function withPageToken(streamUrl: string, pageQuery: string): string {
    const token = new URLSearchParams(pageQuery).get("token");
    if (token === null)
        return streamUrl;
    const url = new URL(streamUrl);
    url.searchParams.set("token", token);
    return url.toString();
}

class VsCodeTransport implements PanelTransport {
    readonly kind = "vscode";
    private readonly onMessage = (event: MessageEvent<unknown>): void => this.handlers.message(event.data);

    constructor(private readonly api: VsCodeApi, private readonly handlers: TransportHandlers) {
        window.addEventListener("message", this.onMessage);
        handlers.status("open");
        queueMicrotask(() => handlers.open());
    }

    send(message: PanelToHost): void {
        this.api.postMessage(message);
    }

    dispose(): void {
        window.removeEventListener("message", this.onMessage);
    }
}

const backoffMs = [500, 1000, 2000, 5000, 10_000];

class WebSocketTransport implements PanelTransport {
    readonly kind = "websocket";
    private socket: WebSocket | undefined;
    private attempt = 0;
    private timer: ReturnType<typeof setTimeout> | undefined;
    private disposed = false;

    constructor(private readonly url: string, private readonly handlers: TransportHandlers) {
        this.connect();
    }

    send(message: PanelToHost): void {
        if (this.socket?.readyState === WebSocket.OPEN)
            this.socket.send(encodeMessage(message));
    }

    dispose(): void {
        this.disposed = true;
        clearTimeout(this.timer);
        this.socket?.close();
    }

    private connect(): void {
        this.handlers.status("connecting");
        const socket = new WebSocket(this.url);
        this.socket = socket;
        socket.addEventListener("open", () => {
            this.attempt = 0;
            this.handlers.status("open");
            this.handlers.open();
        });
        socket.addEventListener("message", (event: MessageEvent<unknown>) => this.handlers.message(event.data));
        socket.addEventListener("close", () => {
            if (this.socket !== socket || this.disposed)
                return;
            this.handlers.status("closed");
            const delay = backoffMs[Math.min(this.attempt++, backoffMs.length - 1)]!;
            this.timer = setTimeout(() => this.connect(), delay);
        });
    }
}
