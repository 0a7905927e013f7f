/**
 * One open stats panel, as the host sees it, whatever carries the messages (VS Code's webview
 * messaging or the dashboard's WebSocket): `ready`/`requestSnapshot` → a snapshot and a fresh
 * subscription whose deltas (≤ 4 Hz) count from seq 1; `setPaused` stops the deltas; `reset` resets
 * the stats; `export` answers with an `exportResult`; with `choices`, `sources` tells the panel what it
 * can show and `selectSource` switches it. Bad messages are dropped and reported.
 */
import {
    DeltaMessage, ErrorMessage, ExportResultMessage, PausedMessage, SnapshotMessage, SourcesMessage, panelMaxHz, parsePanelToHost,
    type ExportFormat, type ExportResultParams, type HostToPanel, type PanelToHost, type SourceChoice
} from "../../../protocol/panelMessages.js";
import type {StatsDelta, StatsSnapshotView} from "../../../protocol/statsView.js";
import {errorMessage} from "../../../common/errorMessage.js";

/** What a panel shows: StatsManager fits. */
export type PanelStatsSource = {
    snapshot(): StatsSnapshotView,
    subscribe(listener: (delta: StatsDelta) => void, options: {maxHz?: number}): () => void,
    reset(): void
};

/** What a panel may switch between (local engine, watched servers, their merged view), and the switch. */
export interface SourceChoices {
    list(): SourceChoice[],
    selected(): string,
    /** Makes `key` the one `source` shows (the caller keeps `source` pointing at it). */
    select(key: string): void
}

export type PanelSessionOptions = {
    /** What the panel shows; with `choices`, whatever is selected there. */
    source: PanelStatsSource,
    choices?: SourceChoices,
    send: (message: HostToPanel) => void,
    /** Produces an export (the browser gets the content; VS Code saves it through a dialog). */
    exportStats: (format: ExportFormat) => Promise<ExportResultParams> | ExportResultParams,
    /** Whether a delta may be sent now (e.g. the socket is not backed up); a skipped delta makes the panel re-sync. */
    canSend?: () => boolean,
    maxHz?: number,
    engineStartedAt?: () => number | undefined,
    onRejected?: (reason: string) => void
};

export class PanelSession {
    rejectedCount = 0;
    private paused = false;
    private unsubscribe: (() => void) | undefined;
    private readonly maxHz: number;

    constructor(private readonly options: PanelSessionOptions) {
        this.maxHz = Math.min(options.maxHz ?? panelMaxHz, panelMaxHz);
    }

    /** Handles one raw message from the panel (object or JSON text). */
    receive(raw: unknown): void {
        let message: PanelToHost;
        try {
            message = parsePanelToHost(raw);
        } catch (error) {
            this.reject(errorMessage(error));
            return;
        }
        switch (message.type) {
            case "ready":
            case "requestSnapshot":
                this.sendSnapshot();
                this.sendSources();
                return;
            case "selectSource": {
                const choices = this.options.choices;
                if (choices === undefined || !choices.list().some((choice) => choice.key === message.key)) {
                    this.reject(`selectSource: no source ${JSON.stringify(message.key.slice(0, 80))}`);
                    return;
                }
                choices.select(message.key);
                this.sendSnapshot();
                this.sendSources();
                return;
            }
            case "setPaused":
                this.paused = message.paused;
                if (message.paused)
                    this.stopDeltas();
                this.options.send(PausedMessage.create({paused: message.paused}));
                return;
            case "reset":
                this.options.source.reset();
                return;
            case "export":
                void this.sendExport(message.format);
                return;
        }
    }

    /** Counts a message the transport itself refused (binary, oversized). */
    reject(reason: string): void {
        this.rejectedCount++;
        this.options.onRejected?.(reason);
    }

    /** The panel is hidden or gone: no more messages until it asks again. */
    stopDeltas(): void {
        this.unsubscribe?.();
        this.unsubscribe = undefined;
    }

    /**
     * The source now shows something else (another server, or back to the engine): a live panel gets a
     * fresh snapshot from it and its deltas from then on; a hidden or paused one gets it when it asks.
     */
    resync(): void {
        if (this.unsubscribe !== undefined) {
            this.sendSnapshot();
            this.sendSources();
        }
    }

    dispose(): void {
        this.stopDeltas();
    }

    private sendSnapshot(): void {
        this.stopDeltas();
        const source = this.options.source;
        const snapshot = source.snapshot();
        if (!this.paused)
            this.unsubscribe = source.subscribe((delta) => {
                if (this.options.canSend?.() ?? true)
                    this.options.send(DeltaMessage.create({delta}));
            }, {maxHz: this.maxHz});
        const engineStartedAt = this.options.engineStartedAt?.();
        this.options.send(SnapshotMessage.create({snapshot, seq: 0, ...(engineStartedAt !== undefined ? {engineStartedAt} : {})}));
    }

    private sendSources(): void {
        const choices = this.options.choices;
        if (choices !== undefined)
            this.options.send(SourcesMessage.create({sources: choices.list(), selected: choices.selected()}));
    }

    private async sendExport(format: ExportFormat): Promise<void> {
        try {
            this.options.send(ExportResultMessage.create(await this.options.exportStats(format)));
        } catch (error) {
            this.options.send(ErrorMessage.create({message: `export failed: ${errorMessage(error)}`}));
        }
    }
}
