/**
 * The stats panel's page, for both hosts: the VS Code webview panel (transport `vscode`) and the
 * headless dashboard server (transport `websocket`). Node-side, no `vscode` import.
 *
 * CSP (vscode-extension-samples' webview-sample): nothing by default; scripts only with the nonce;
 * styles and images only from `cspSource`; the WebSocket URL the only connection allowed.
 */
import {panelConfigElementId, type PanelConfig, type PanelTransportConfig} from "../../../protocol/panelConfig.js";

export type PanelHtmlOptions = {
    /** URL of the bundle (`dist/webview/panel.js`), e.g. `webview.asWebviewUri(...)`. */
    scriptUri: string,
    /** URL of the stylesheet (`dist/webview/panel.css`). */
    styleUri: string,
    /** Where styles and images may come from: `webview.cspSource` in VS Code, `'self'` for the dashboard. */
    cspSource: string,
    /** A fresh random nonce per render (see {@link makeNonce}). */
    nonce: string,
    transport: PanelTransportConfig,
    /** The page title. Default "Inference Monitor". */
    title?: string
};

export class PanelHtmlError extends Error {
    override readonly name = "PanelHtmlError";
}

/** A random nonce (128 bits, base64url) from the platform's CSPRNG. */
export function makeNonce(): string {
    const bytes = new Uint8Array(16);
    globalThis.crypto.getRandomValues(bytes);
    let binary = "";
    for (const byte of bytes)
        binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The Content-Security-Policy of the page. */
export function panelCsp(options: Pick<PanelHtmlOptions, "cspSource" | "nonce" | "transport">): string {
    const connect = options.transport.kind === "websocket" ? cspUrl(options.transport.url) : "'none'";
    return [
        "default-src 'none'",
        `img-src ${options.cspSource} data:`,
        `style-src ${options.cspSource}`,
        `font-src ${options.cspSource}`,
        `script-src 'nonce-${options.nonce}'`,
        `connect-src ${connect}`,
        "base-uri 'none'",
        "form-action 'none'"
    ].join("; ");
}

export function renderPanelHtml(options: PanelHtmlOptions): string {
    checkCspToken(options.cspSource, "cspSource");
    if (!/^[A-Za-z0-9+/_=-]{16,}$/.test(options.nonce))
        throw new PanelHtmlError("nonce: expected at least 16 base64 characters");
    const config: PanelConfig = {transport: options.transport};
    const nonce = escapeAttribute(options.nonce);
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(panelCsp(options))}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeText(options.title ?? "Inference Monitor")}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${escapeAttribute(options.styleUri)}">
</head>
<body>
<main id="app" class="app"><p class="loading">Connecting…</p></main>
<script nonce="${nonce}" type="application/json" id="${panelConfigElementId}">${scriptJson(config)}</script>
<script nonce="${nonce}" src="${escapeAttribute(options.scriptUri)}"></script>
</body>
</html>
`;
}

/** JSON that cannot close the script element or start a comment inside it. */
function scriptJson(value: unknown): string {
    return JSON.stringify(value)
        .replace(/</g, "\\u003c")
        .replace(/>/g, "\\u003e")
        .replace(/&/g, "\\u0026")
        .replace(/\u2028/g, "\\u2028")
        .replace(/\u2029/g, "\\u2029");
}

/** A URL as a CSP source expression: no spaces, semicolons or commas. */
function cspUrl(url: string): string {
    let parsed: URL;
    try {
        parsed = new URL(url);
    } catch {
        throw new PanelHtmlError(`transport.url: not a URL: ${JSON.stringify(url)}`);
    }
    if (parsed.protocol !== "ws:" && parsed.protocol !== "wss:")
        throw new PanelHtmlError(`transport.url: expected ws: or wss:, got ${parsed.protocol}`);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}

function checkCspToken(value: string, what: string): void {
    if (value === "" || /[;,\r\n]/.test(value))
        throw new PanelHtmlError(`${what}: not a CSP source list: ${JSON.stringify(value)}`);
}

function escapeText(text: string): string {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** For double-quoted attribute values (every attribute here is double-quoted). */
function escapeAttribute(text: string): string {
    return escapeText(text).replace(/"/g, "&quot;");
}
