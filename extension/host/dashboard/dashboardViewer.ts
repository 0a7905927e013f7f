/**
 * One browser on the dashboard's `/stream` (dashboardServer.ts): its PanelSession, what it may ask for
 * and how often, and what happens when it stops reading or answering.
 *
 * - Its source: its own pick among the server's `choices` (`watch`: all servers merged, or one), else
 *   the server's `source`.
 * - Before every message to it, what it has not read yet is checked: a delta over `maxBufferedBytes`
 *   is skipped (the page then asks for a snapshot), anything else closes it with 1013.
 * - Messages that make a snapshot (`ready`, `requestSnapshot`, `selectSource`) and `export` are
 *   rate-limited (token buckets): the excess is dropped and counted; a dropped snapshot request is
 *   answered once the rate allows (one snapshot for all of them), anything else gets one `error`.
 */
import {WebSocket} from "ws";
import {
    ErrorMessage, encodeMessage, parsePanelToHost, type HostToPanel, type PanelToHost
} from "../../../protocol/panelMessages.js";
import {PanelSession, type PanelStatsSource} from "../panel/panelSession.js";
import {exportStats} from "../stats/statsExport.js";
import {rawDataToString} from "../net/rawData.js";
import {TokenBucket, type RateLimit} from "./tokenBucket.js";

/** One of the dashboard's `choices`. */
export type NamedStatsSource = {key: string, label: string, source: PanelStatsSource};

/** The close code for a client that does not read what it asked for (RFC 6455: try again later). */
export const slowClientCloseCode = 1013;

/** What a viewer needs from its server: settings, and where it counts and reports what it refused. */
export type ViewerHost = {
    source: PanelStatsSource,
    choices?: () => NamedStatsSource[],
    maxHz?: number,
    engineStartedAt?: () => number | undefined,
    maxBufferedBytes: number,
    snapshotRate: RateLimit,
    exportRate: RateLimit,
    closeGraceMs: number,
    countRejected(reason: string): void,
    countRateLimited(): void,
    countSlowClient(reason: string): void,
    /** Reports without counting (the count is elsewhere). */
    report(reason: string): void,
    /** The viewer is gone (closed, dropped): the server forgets it. */
    forget(viewer: DashboardViewer): void
};

/** Client messages answered with a fresh snapshot (the costly part of the protocol). */
const makesSnapshot = new Set<PanelToHost["type"]>(["ready", "requestSnapshot", "selectSource"]);

export class DashboardViewer {
    /** Answered the last ping. */
    alive = true;
    private readonly session: PanelSession;
    private readonly snapshots: TokenBucket;
    private readonly exports: TokenBucket;
    /** Told it is over its rate since it last got through (one `error` per run of dropped messages). */
    private toldLimited = false;
    /** A snapshot it asked for over its rate, sent when its bucket has a token again (one, however many it asked for). */
    private owedSnapshot: NodeJS.Timeout | undefined;
    private dropped = false;

    constructor(readonly socket: WebSocket, private readonly host: ViewerHost) {
        this.snapshots = new TokenBucket(host.snapshotRate);
        this.exports = new TokenBucket(host.exportRate);
        this.session = this.createSession();
        socket.on("pong", () => {
            this.alive = true;
        });
        socket.on("message", (data, isBinary) => this.onMessage(data, isBinary));
        // ws reports an oversized or malformed frame here, then closes the socket.
        socket.on("error", (error) => this.session.reject(`client socket: ${error.message}`));
        socket.on("close", () => this.drop());
    }

    /** Forgets this viewer: no more messages to it, its subscription ended. */
    drop(): void {
        if (this.dropped)
            return;
        this.dropped = true;
        clearTimeout(this.owedSnapshot);
        this.session.dispose();
        this.host.forget(this);
    }

    private createSession(): PanelSession {
        const host = this.host;
        const list = host.choices;
        let selectedKey = list?.()[0]?.key;
        const current = (): PanelStatsSource => list?.().find((choice) => choice.key === selectedKey)?.source ?? host.source;
        const source: PanelStatsSource = {
            snapshot: () => current().snapshot(),
            subscribe: (listener, subscribeOptions) => current().subscribe(listener, subscribeOptions),
            reset: () => current().reset()
        };
        return new PanelSession({
            source,
            ...(list !== undefined ? {choices: {
                list: () => list().map(({key, label}) => ({key, label})),
                selected: () => selectedKey ?? "",
                select: (key: string) => {
                    selectedKey = key;
                }
            }} : {}),
            send: (message) => this.send(message),
            // The browser gets the export's content and offers it as a download.
            exportStats: (format) => {
                const exported = exportStats(source.snapshot(), format);
                return {format, fileName: exported.fileName, mimeType: exported.mimeType, content: exported.content};
            },
            // A slow client misses deltas; the seq gap makes it ask for a snapshot.
            canSend: () => this.socket.bufferedAmount <= host.maxBufferedBytes,
            ...(host.maxHz !== undefined ? {maxHz: host.maxHz} : {}),
            ...(host.engineStartedAt !== undefined ? {engineStartedAt: host.engineStartedAt} : {}),
            onRejected: (reason) => host.countRejected(reason)
        });
    }

    private send(message: HostToPanel): void {
        if (this.socket.readyState !== WebSocket.OPEN)
            return;
        // Checked before every send: a client that does not read what it asked for is closed, so what
        // the host holds for it stays under the limit (plus this one message).
        if (this.socket.bufferedAmount > this.host.maxBufferedBytes) {
            this.closeSlow();
            return;
        }
        this.socket.send(encodeMessage(message));
    }

    private onMessage(data: Parameters<typeof rawDataToString>[0], isBinary: boolean): void {
        if (this.socket.readyState !== WebSocket.OPEN)
            return; // closing (e.g. for not reading): nothing more is done for it
        if (isBinary) {
            this.session.reject("binary message");
            return;
        }
        const text = rawDataToString(data);
        let message: PanelToHost;
        try {
            message = parsePanelToHost(text);
        } catch {
            this.session.receive(text); // the session rejects and counts it
            return;
        }
        if (this.withinRate(message))
            this.session.receive(message);
    }

    /**
     * Whether `message` may be handled now. Over the client's rate it is dropped and counted; a dropped
     * `ready`/`requestSnapshot` still gets one snapshot when the bucket refills (a page that waits for
     * it after a seq gap is never stranded; nothing is queued), anything else one `error` per run.
     */
    private withinRate(message: PanelToHost): boolean {
        const bucket = message.type === "export" ? this.exports : makesSnapshot.has(message.type) ? this.snapshots : undefined;
        if (bucket === undefined || bucket.take()) {
            if (bucket !== undefined)
                this.toldLimited = false;
            if (bucket === this.snapshots) {
                clearTimeout(this.owedSnapshot); // this one answers what was owed
                this.owedSnapshot = undefined;
            }
            return true;
        }
        this.host.countRateLimited();
        if (message.type === "ready" || message.type === "requestSnapshot") {
            if (this.owedSnapshot === undefined) {
                this.host.report(`a /stream client sent ${message.type} too often: one snapshot follows when its rate allows`);
                this.oweSnapshot(message);
            }
            return false;
        }
        if (!this.toldLimited) {
            this.toldLimited = true;
            const rate = message.type === "export" ? this.host.exportRate : this.host.snapshotRate;
            this.host.report(`a /stream client sent ${message.type} too often: dropped`);
            this.send(ErrorMessage.create({message: `${message.type} dropped: at most ${rate.burst} at once, then ${rate.perSecond} per second`}));
        }
        return false;
    }

    /** Answers `message` (a snapshot request) as soon as the snapshot bucket has a token. */
    private oweSnapshot(message: PanelToHost): void {
        this.owedSnapshot = setTimeout(() => {
            if (this.socket.readyState !== WebSocket.OPEN)
                return;
            if (!this.snapshots.take()) {
                this.oweSnapshot(message);
                return;
            }
            this.owedSnapshot = undefined;
            this.session.receive(message);
        }, this.snapshots.msUntilToken());
        this.owedSnapshot.unref();
    }

    /** Closes a client that has more unread than `maxBufferedBytes`, and cuts it off if it does not finish closing. */
    private closeSlow(): void {
        const buffered = this.socket.bufferedAmount;
        this.host.countSlowClient(`a /stream client has ${buffered} bytes unread (more than ${this.host.maxBufferedBytes}): closed`);
        this.drop();
        this.socket.close(slowClientCloseCode, "too much unread data: the client does not keep up");
        const timer = setTimeout(() => this.socket.terminate(), this.host.closeGraceMs);
        timer.unref();
        this.socket.once("close", () => clearTimeout(timer));
    }
}
