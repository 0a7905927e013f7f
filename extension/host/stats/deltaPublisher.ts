import type {EngineStateName, StatsDelta, StatsSnapshotView, TimeSeriesPoint} from "../../../protocol/statsView.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";

/** The compared part of a view's state: what a delta carries when it changed. */
export type ViewScalars = Pick<StatsSnapshotView,
    "engine" | "state" | "counters" | "gauges" | "percentiles" | "histograms" | "clients" | "target" | "lastActive">;

/** Where the publisher reads the current state. */
export interface DeltaSource {
    scalars(now: number): ViewScalars,
    seriesCursor(): number,
    seriesSince(cursor: number): TimeSeriesPoint[],
    requestCursor(): number,
    requestsSince(cursor: number): RequestLifecycle[]
}

export type SubscribeOptions = {
    /** Most deltas per second. Default 4. Deltas go out on the manager's tick, so at most 1000 / tickIntervalMs. */
    maxHz?: number
};

export type StatsListener = (delta: StatsDelta) => void;

/** Sections sent key by key: only the keys that changed. */
type Section = "counters" | "gauges" | "percentiles" | "histograms";
const sections: readonly Section[] = ["counters", "gauges", "percentiles", "histograms"];
/** Parts sent whole whenever any of them changed. */
type WholePart = "engine" | "clients" | "target" | "lastActive";
const wholeParts: readonly WholePart[] = ["engine", "clients", "target", "lastActive"];

type Subscriber = {
    listener: StatsListener,
    minGapMs: number,
    lastEmitAt: number,
    seq: number,
    sent: Record<Section, Map<string, string>>,
    /** The JSON of each whole part as last sent. */
    sentWhole: Map<WholePart, string>,
    state: EngineStateName,
    seriesCursor: number,
    requestCursor: number
};

/** Timer jitter allowance when checking a subscriber's minimum gap between deltas. */
const jitterMs = 1;

/**
 * Sends each subscriber what changed since its last delta, at most `maxHz` times a second. With no
 * subscribers it computes nothing.
 */
export class DeltaPublisher {
    private readonly subscribers = new Set<Subscriber>();

    constructor(private readonly source: DeltaSource, private readonly onListenerError: (error: unknown) => void) {}

    get size(): number {
        return this.subscribers.size;
    }

    /** The subscriber's baseline is the state now: take `snapshot()` in the same synchronous turn. */
    subscribe(listener: StatsListener, options: SubscribeOptions, now: number): () => void {
        const maxHz = options.maxHz ?? 4;
        if (!(maxHz > 0))
            throw new RangeError(`maxHz must be > 0, got ${maxHz}`);
        const subscriber: Subscriber = {
            listener, minGapMs: 1000 / maxHz, lastEmitAt: Number.NEGATIVE_INFINITY, seq: 0,
            sent: {counters: new Map(), gauges: new Map(), percentiles: new Map(), histograms: new Map()},
            sentWhole: new Map(), state: "stopped", seriesCursor: 0, requestCursor: 0
        };
        this.rebase(subscriber, this.source.scalars(now));
        this.subscribers.add(subscriber);
        return () => {
            this.subscribers.delete(subscriber);
        };
    }

    /** Sends the subscribers that are due whatever changed. */
    emitDue(now: number): void {
        let scalars: ViewScalars | undefined;
        for (const subscriber of this.subscribers) {
            if (now - subscriber.lastEmitAt < subscriber.minGapMs - jitterMs)
                continue;
            scalars ??= this.source.scalars(now);
            const delta = this.diff(subscriber, scalars, now);
            if (delta !== undefined)
                this.send(subscriber, delta, now);
        }
    }

    /** After a reset: every subscriber gets the new snapshot and starts over from it. */
    emitReset(snapshot: StatsSnapshotView, now: number): void {
        for (const subscriber of this.subscribers) {
            this.rebase(subscriber, snapshot);
            this.send(subscriber, {t: now, seq: 0, reset: snapshot}, now);
        }
    }

    private rebase(subscriber: Subscriber, scalars: ViewScalars): void {
        for (const section of sections) {
            subscriber.sent[section].clear();
            for (const [key, value] of Object.entries(scalars[section]))
                subscriber.sent[section].set(key, JSON.stringify(value));
        }
        for (const part of wholeParts)
            subscriber.sentWhole.set(part, JSON.stringify(scalars[part]));
        subscriber.state = scalars.state;
        subscriber.seriesCursor = this.source.seriesCursor();
        subscriber.requestCursor = this.source.requestCursor();
    }

    private diff(subscriber: Subscriber, scalars: ViewScalars, now: number): StatsDelta | undefined {
        const delta: StatsDelta = {t: now, seq: 0};
        let changed = false;
        if (scalars.state !== subscriber.state) {
            subscriber.state = scalars.state;
            delta.state = scalars.state;
            changed = true;
        }
        for (const section of sections) {
            const part = diffSection(scalars[section], subscriber.sent[section]);
            if (part !== undefined) {
                Object.assign(delta, {[section]: part});
                changed = true;
            }
        }
        for (const part of wholeParts) {
            const json = JSON.stringify(scalars[part]);
            if (json !== subscriber.sentWhole.get(part)) {
                subscriber.sentWhole.set(part, json);
                Object.assign(delta, {[part]: scalars[part]});
                changed = true;
            }
        }
        const seriesCursor = this.source.seriesCursor();
        if (seriesCursor !== subscriber.seriesCursor) {
            delta.timeSeries = this.source.seriesSince(subscriber.seriesCursor);
            subscriber.seriesCursor = seriesCursor;
            changed = true;
        }
        const requestCursor = this.source.requestCursor();
        if (requestCursor !== subscriber.requestCursor) {
            const requests = this.source.requestsSince(subscriber.requestCursor);
            subscriber.requestCursor = requestCursor;
            if (requests.length > 0) {
                delta.requests = requests;
                changed = true;
            }
        }
        return changed ? delta : undefined;
    }

    private send(subscriber: Subscriber, delta: StatsDelta, now: number): void {
        subscriber.lastEmitAt = now;
        delta.seq = ++subscriber.seq;
        try {
            subscriber.listener(delta);
        } catch (error) {
            this.onListenerError(error);
        }
    }
}

/** The keys of `next` whose JSON differs from what was last sent (and records them as sent). */
function diffSection<T extends object>(next: T, sent: Map<string, string>): Partial<T> | undefined {
    let out: Partial<T> | undefined;
    for (const key of Object.keys(next) as Array<keyof T & string>) {
        const json = JSON.stringify(next[key]);
        if (sent.get(key) === json)
            continue;
        sent.set(key, json);
        out ??= {};
        out[key] = next[key];
    }
    return out;
}
