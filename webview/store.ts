/**
 * The panel's copy of the host's stats: a snapshot, then deltas applied on top, in bounded buffers
 * (at most 15 minutes of time-series points and the 500 most recent requests), so a panel left open
 * for hours keeps its memory flat. The host is the source of truth: on a seq gap the store asks for
 * a fresh snapshot and ignores deltas until it arrives.
 */
import type {StatsDelta, StatsSnapshotView, TimeSeriesPoint} from "../protocol/statsView.js";
import {BoundedSeries} from "./boundedSeries.js";
import type {SnapshotParams} from "../protocol/panelMessages.js";
import type {RequestLifecycle} from "../protocol/requestLifecycle.js";

export const storeLimits = {
    /** Time-series points older than this (from the newest) are dropped. */
    seriesWindowMs: 15 * 60_000,
    /** Hard cap on time-series points, whatever the sample interval. */
    maxSeriesPoints: 15 * 60 * 10,
    /** Requests kept for the waterfall (the most recent by arrival). */
    maxRequests: 500
} as const;

export type DeltaOutcome = "applied" | "stale" | "gap" | "waitingForSnapshot";

/** The snapshot's scalar part (the per-client table included); the series and requests live in bounded buffers instead. */
type Scalars = Omit<StatsSnapshotView, "timeSeries" | "requests">;

export class StatsStore {
    readonly series = new BoundedSeries<TimeSeriesPoint>(storeLimits.seriesWindowMs, storeLimits.maxSeriesPoints);
    /** By id, in arrival order (Map insertion order; updates keep their place). */
    readonly requests = new Map<string, RequestLifecycle>();
    private current: Scalars | undefined;
    private lastSeq = 0;
    private waiting = true;
    private startedAt: number | undefined;
    /** Bumped on every change; views compare it to skip work. */
    version = 0;
    private readonly listeners = new Set<() => void>();

    get hasData(): boolean {
        return this.current !== undefined;
    }

    /** The latest values; throws before the first snapshot (check `hasData`). */
    get view(): Readonly<Scalars> {
        if (this.current === undefined)
            throw new Error("no snapshot yet");
        return this.current;
    }

    /** Host time of the latest snapshot or delta. */
    get t(): number {
        return this.current?.t ?? 0;
    }

    get seq(): number {
        return this.lastSeq;
    }

    /** True from construction (and after a gap) until a snapshot arrives. */
    get awaitingSnapshot(): boolean {
        return this.waiting;
    }

    /** When the engine started (host clock), as well as known; see `applySnapshot`. */
    get engineStartedAt(): number | undefined {
        return this.startedAt;
    }

    onChange(listener: () => void): () => void {
        this.listeners.add(listener);
        return () => this.listeners.delete(listener);
    }

    /** Replaces everything with a snapshot; the next delta must be `seq + 1`. */
    applySnapshot(message: SnapshotParams): void {
        this.replace(message.snapshot);
        this.lastSeq = message.seq;
        this.waiting = false;
        const snapshot = message.snapshot;
        this.startedAt = snapshot.engine === null ? undefined : message.engineStartedAt ?? snapshot.timeSeries[0]?.t ?? snapshot.t;
        this.changed();
    }

    /** Applies a delta in order; tells the caller about a gap (it should request a snapshot). */
    applyDelta(delta: StatsDelta): DeltaOutcome {
        if (this.waiting || this.current === undefined)
            return "waitingForSnapshot";
        if (delta.seq <= this.lastSeq)
            return "stale";
        if (delta.seq !== this.lastSeq + 1) {
            this.waiting = true;
            return "gap";
        }
        this.lastSeq = delta.seq;
        if (delta.reset !== undefined) {
            this.replace(delta.reset);
            this.changed();
            return "applied";
        }
        const current = this.current;
        current.t = Math.max(current.t, delta.t);
        if (delta.engine !== undefined) {
            // The host sends the info only when it changed: another engine became ready (a restart, or another
            // model; in-process its pid is ours again), so the uptime starts over.
            this.startedAt = delta.engine === null ? undefined : delta.t;
            current.engine = delta.engine;
        }
        if (delta.state !== undefined)
            current.state = delta.state;
        if (delta.counters !== undefined)
            Object.assign(current.counters, delta.counters);
        if (delta.gauges !== undefined)
            Object.assign(current.gauges, delta.gauges);
        if (delta.percentiles !== undefined)
            Object.assign(current.percentiles, delta.percentiles);
        if (delta.histograms !== undefined)
            Object.assign(current.histograms, delta.histograms);
        if (delta.timeSeries !== undefined)
            this.series.push(delta.timeSeries);
        if (delta.requests !== undefined)
            this.putRequests(delta.requests);
        if (delta.clients !== undefined)
            current.clients = delta.clients;
        if (delta.target !== undefined)
            current.target = delta.target;
        if (delta.lastActive !== undefined)
            current.lastActive = delta.lastActive;
        this.changed();
        return "applied";
    }

    private replace(snapshot: StatsSnapshotView): void {
        this.current = {
            t: snapshot.t, config: snapshot.config, engine: snapshot.engine, state: snapshot.state,
            counters: {...snapshot.counters}, gauges: {...snapshot.gauges},
            percentiles: {...snapshot.percentiles}, histograms: {...snapshot.histograms}, clients: snapshot.clients,
            target: snapshot.target, lastActive: snapshot.lastActive
        };
        this.series.clear();
        this.series.push(snapshot.timeSeries);
        this.requests.clear();
        this.putRequests(snapshot.requests);
    }

    private putRequests(records: readonly RequestLifecycle[]): void {
        for (const record of records)
            this.requests.set(record.id, record);
        while (this.requests.size > storeLimits.maxRequests)
            this.requests.delete(this.requests.keys().next().value!);
    }

    private changed(): void {
        this.version++;
        for (const listener of this.listeners)
            listener();
    }
}
