/**
 * THE protocol between the host (the VS Code extension's stats panel, or the headless dashboard
 * server) and the stats panel (the webview bundle), in both directions. Each message is declared once,
 * as a typed constant with its validator (gitlens' `IpcNotification` style); the union per direction
 * is derived from those declarations (vscode-js-profile-visualizer's `realtime/protocol.ts` style).
 *
 * The conversation:
 *   panel → `ready`                       host → `snapshot` (seq 0), then `delta`s (seq 1, 2, …) at ≤ 4 Hz
 *   panel → `requestSnapshot` (seq gap, reconnect, resume)   host → a fresh `snapshot`, deltas restart after it
 *   panel → `setPaused` {paused}          host → `paused`; while paused the host sends no deltas
 *   panel → `reset`                       host resets its stats; the next delta carries `reset` (a new snapshot)
 *   panel → `export` {format}             host → `exportResult` (content to download, or where it was saved) or `error`
 *   host → `sources` {sources, selected}  what the panel can show (local engine, watched servers, their merged view)
 *   panel → `selectSource` {key}          host → a fresh `snapshot` of that source, and `sources` again
 *
 * Plain JSON only; no `vscode` import: the webview bundle and Node both use this file. Receivers parse
 * every message with `parseHostToPanel` / `parsePanelToHost`, which throw {@link PanelProtocolError};
 * a receiver drops and counts a message that fails, it never crashes on one.
 */
import {ProtocolError, expectArray, expectInteger, expectNumber, expectObject, expectOneOf, expectString, optionalBoolean, optionalString, type JsonObject} from "./validation.js";
import type {StatsDelta, StatsSnapshotView} from "./statsView.js";
import {checkDelta, checkSnapshotView} from "./statsViewValidation.js";

/** Bumped when a message changes incompatibly; the panel sends it in `ready`. */
export const panelProtocolVersion = 1;

/** Most bytes a panel → host message may have (the dashboard server's WebSocket `maxPayload`). */
export const maxPanelMessageBytes = 4096;

/** Deltas per second the host sends a panel at most. */
export const panelMaxHz = 4;

export const exportFormats = ["json", "csv"] as const;
export type ExportFormat = typeof exportFormats[number];

export type ProtocolDirection = "hostToPanel" | "panelToHost";

/** A message that failed validation; the receiver drops it and counts it. */
export class PanelProtocolError extends Error {
    override readonly name = "PanelProtocolError";

    constructor(readonly direction: ProtocolDirection, message: string) {
        super(message);
    }
}

/** One message: its `type` tag and the validator of the rest of it. Declared once, below. */
export class MessageDecl<Type extends string, Params extends object> {
    constructor(readonly type: Type, private readonly checkParams: (obj: JsonObject, what: string) => Params) {}

    /** Builds the message (typed: use it instead of object literals when sending). */
    create(params: Params): {type: Type} & Params {
        return {type: this.type, ...params};
    }

    /** Validates a message whose `type` is already known to be this one. */
    check(obj: JsonObject): {type: Type} & Params {
        return {type: this.type, ...this.checkParams(obj, this.type)};
    }
}

type Empty = Record<never, never>;
type MessageOf<D> = D extends MessageDecl<infer Type, infer Params> ? {type: Type} & Params : never;

// ---- host → panel ---------------------------------------------------------------------------------

export type SnapshotParams = {
    snapshot: StatsSnapshotView,
    /** The seq the following deltas count from: the next delta is `seq + 1`. 0 on a fresh subscription. */
    seq: number,
    /** When the engine became ready (epoch ms, host clock), if the host knows; the panel's uptime. */
    engineStartedAt?: number
};
export type DeltaParams = {delta: StatsDelta};
export type PausedParams = {paused: boolean};
export type ExportResultParams = {
    format: ExportFormat,
    fileName: string,
    mimeType: string,
    /** The exported text, for the panel to offer as a download (the browser dashboard). */
    content?: string,
    /** Where the host saved the export (VS Code's save dialog); no content then. */
    savedTo?: string
};
export type ErrorParams = {message: string};
/** One thing the panel can show; `key` is what `selectSource` sends back. */
export type SourceChoice = {key: string, label: string};
export type SourcesParams = {sources: SourceChoice[], selected: string};
/** At most this many sources, keys and labels at most this long. */
export const sourceLimits = {sources: 64, keyLength: 2048, labelLength: 200} as const;

export const SnapshotMessage = new MessageDecl<"snapshot", SnapshotParams>("snapshot", (obj, what) => {
    const params: SnapshotParams = {snapshot: checkSnapshotView(obj.snapshot, `${what}.snapshot`), seq: nonNegativeInteger(obj, "seq", what)};
    if (obj.engineStartedAt !== undefined)
        params.engineStartedAt = expectNumber(obj, "engineStartedAt", what);
    return params;
});
export const DeltaMessage = new MessageDecl<"delta", DeltaParams>("delta", (obj, what) => ({delta: checkDelta(obj.delta, `${what}.delta`)}));
export const PausedMessage = new MessageDecl<"paused", PausedParams>("paused", (obj, what) => ({paused: expectBoolean(obj, "paused", what)}));
export const ExportResultMessage = new MessageDecl<"exportResult", ExportResultParams>("exportResult", (obj, what) => {
    const params: ExportResultParams = {
        format: expectOneOf(obj, "format", exportFormats, what),
        fileName: expectString(obj, "fileName", what, 255),
        mimeType: expectString(obj, "mimeType", what, 100)
    };
    const content = optionalString(obj, "content", what, 256 << 20);
    if (content !== undefined) params.content = content;
    const savedTo = optionalString(obj, "savedTo", what, 4096);
    if (savedTo !== undefined) params.savedTo = savedTo;
    return params;
});
export const ErrorMessage = new MessageDecl<"error", ErrorParams>("error", (obj, what) => ({message: expectString(obj, "message", what, 10_000)}));
export const SourcesMessage = new MessageDecl<"sources", SourcesParams>("sources", (obj, what) => ({
    sources: expectArray(obj, "sources", what, sourceLimits.sources).map((value, i) => {
        const choice = expectObject(value, `${what}.sources[${i}]`);
        return {key: expectString(choice, "key", `${what}.sources[${i}]`, sourceLimits.keyLength),
            label: expectString(choice, "label", `${what}.sources[${i}]`, sourceLimits.labelLength)};
    }),
    selected: expectString(obj, "selected", what, sourceLimits.keyLength)
}));

const hostToPanelDecls = [SnapshotMessage, DeltaMessage, PausedMessage, ExportResultMessage, ErrorMessage, SourcesMessage] as const;
export type HostToPanel = MessageOf<typeof hostToPanelDecls[number]>;

// ---- panel → host ---------------------------------------------------------------------------------

export const snapshotReasons = ["seqGap", "resume", "reconnect", "user"] as const;
export type SnapshotReason = typeof snapshotReasons[number];

export type ReadyParams = {protocolVersion: number};
export type SetPausedParams = {paused: boolean};
export type ExportParams = {format: ExportFormat};
export type RequestSnapshotParams = {reason: SnapshotReason};
export type SelectSourceParams = {key: string};

export const ReadyMessage = new MessageDecl<"ready", ReadyParams>("ready", (obj, what) => ({protocolVersion: nonNegativeInteger(obj, "protocolVersion", what)}));
export const SetPausedMessage = new MessageDecl<"setPaused", SetPausedParams>("setPaused", (obj, what) => ({paused: expectBoolean(obj, "paused", what)}));
export const ResetMessage = new MessageDecl<"reset", Empty>("reset", () => ({}));
export const ExportMessage = new MessageDecl<"export", ExportParams>("export", (obj, what) => ({format: expectOneOf(obj, "format", exportFormats, what)}));
export const RequestSnapshotMessage = new MessageDecl<"requestSnapshot", RequestSnapshotParams>("requestSnapshot",
    (obj, what) => ({reason: expectOneOf(obj, "reason", snapshotReasons, what)}));

export const SelectSourceMessage = new MessageDecl<"selectSource", SelectSourceParams>("selectSource",
    (obj, what) => ({key: expectString(obj, "key", what, sourceLimits.keyLength)}));

const panelToHostDecls = [
    ReadyMessage, SetPausedMessage, ResetMessage, ExportMessage, RequestSnapshotMessage, SelectSourceMessage
] as const;
export type PanelToHost = MessageOf<typeof panelToHostDecls[number]>;

// ---- parsing ----------------------------------------------------------------------------------------

/**
 * Validates a message for the panel. Accepts the object (VS Code `postMessage`) or its JSON text
 * (WebSocket). Throws PanelProtocolError.
 */
export function parseHostToPanel(value: unknown): HostToPanel {
    return parseWith("hostToPanel", hostToPanelDecls, value, Number.POSITIVE_INFINITY) as HostToPanel;
}

/**
 * Validates a message for the host. Accepts the object (VS Code `onDidReceiveMessage`) or its JSON
 * text (WebSocket); text longer than {@link maxPanelMessageBytes} is refused. Throws PanelProtocolError.
 */
export function parsePanelToHost(value: unknown): PanelToHost {
    return parseWith("panelToHost", panelToHostDecls, value, maxPanelMessageBytes) as PanelToHost;
}

/** The wire form of a message (both directions). */
export function encodeMessage(message: HostToPanel | PanelToHost): string {
    return JSON.stringify(message);
}

function parseWith(
    direction: ProtocolDirection,
    decls: readonly MessageDecl<string, object>[],
    value: unknown,
    maxTextLength: number
): {type: string} {
    try {
        const obj = expectObject(typeof value === "string" ? parseJson(value, maxTextLength) : value, "message");
        const type = obj.type;
        const decl = decls.find((candidate) => candidate.type === type);
        if (decl === undefined)
            throw new ProtocolError(`unknown message type ${JSON.stringify(String(type)).slice(0, 80)}`);
        return decl.check(obj);
    } catch (error) {
        if (error instanceof ProtocolError)
            throw new PanelProtocolError(direction, error.message);
        throw error;
    }
}

function parseJson(text: string, maxTextLength: number): unknown {
    if (text.length > maxTextLength)
        throw new ProtocolError(`message longer than ${maxTextLength} characters`);
    try {
        return JSON.parse(text) as unknown;
    } catch {
        throw new ProtocolError("message is not JSON");
    }
}

function expectBoolean(obj: JsonObject, key: string, what: string): boolean {
    const value = optionalBoolean(obj, key, what);
    if (value === undefined)
        throw new ProtocolError(`${what}.${key}: expected a boolean`);
    return value;
}

function nonNegativeInteger(obj: JsonObject, key: string, what: string): number {
    const value = expectInteger(obj, key, what);
    if (value < 0)
        throw new ProtocolError(`${what}.${key}: expected >= 0`);
    return value;
}
