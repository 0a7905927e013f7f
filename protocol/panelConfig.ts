/**
 * What the page tells the panel bundle: how to reach the host. Written by `renderPanelHtml` (Node)
 * into `<script type="application/json" id="config">`, read by the bundle (browser).
 */
import {ProtocolError, expectObject, expectOneOf, expectString} from "./validation.js";

export type PanelTransportConfig = {kind: "vscode"} | {kind: "websocket", url: string};

export type PanelConfig = {transport: PanelTransportConfig};

/** The id of the `<script type="application/json">` element that holds the config. */
export const panelConfigElementId = "config";

export class PanelConfigError extends Error {
    override readonly name = "PanelConfigError";
}

/** Validates a config object; throws PanelConfigError. */
export function parsePanelConfig(value: unknown): PanelConfig {
    try {
        const obj = expectObject(value, "config");
        const transport = expectObject(obj.transport, "config.transport");
        const kind = expectOneOf(transport, "kind", ["vscode", "websocket"] as const, "config.transport");
        if (kind === "vscode")
            return {transport: {kind}};
        const url = expectString(transport, "url", "config.transport", 2048);
        if (!/^wss?:\/\//.test(url))
            throw new ProtocolError("config.transport.url: expected a ws:// or wss:// URL");
        return {transport: {kind, url}};
    } catch (error) {
        if (error instanceof ProtocolError)
            throw new PanelConfigError(error.message);
        throw error;
    }
}
