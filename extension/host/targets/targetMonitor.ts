/**
 * Watches servers — llama.cpp's, vLLM (several replicas or data-parallel ranks), Ollama — by polling
 * them, and feeds one StatsManager as if they were one engine: the counters' increases as a step's
 * tokens (summed over replicas, so merged counters are exact), the gauges summed, the servers' own
 * histograms as bucket estimates, and each replica's state in the view's `target`. Optionally also
 * one sink per server, fed that server alone from the same poll (the per-server views of a merged
 * watch): each server is read once per interval however many views show it. The arithmetic is in
 * targetSources.ts.
 */
import {errorMessage} from "../../../common/errorMessage.js";
import type {TargetKind, TargetStatus, TargetView} from "../../../protocol/targetView.js";
import type {EngineClientState} from "../engineClient/engineObserver.js";
import type {EngineStep} from "../engineClient/engineStep.js";
import {readLlamaCpp} from "./llamaCppReader.js";
import {ModelIdLookup} from "./modelIdLookup.js";
import {readOllama} from "./ollamaReader.js";
import {probeTarget} from "./probeTarget.js";
import {TargetReadError, type TargetGetOptions} from "./targetHttp.js";
import type {TargetReading} from "./targetReading.js";
import {engineStateOf, stepOf, takeIncrease, viewOf, type Source, type WatchedTarget} from "./targetSources.js";
import {readVllm} from "./vllmReader.js";

export type {WatchedTarget} from "./targetSources.js";

/** What the monitor feeds: StatsManager fits. */
export interface TargetSink {
    onEngineState(state: EngineClientState): void,
    onOutputs(step: EngineStep): void,
    onTarget(view: TargetView | null): void
}

export type TargetMonitorOptions = {
    targets: readonly WatchedTarget[],
    /** Fed all the targets merged. */
    sink: TargetSink,
    /**
     * One per target, in the order of `targets`: fed that server alone, exactly as a monitor watching
     * only it would feed it, from the same polls as `sink`.
     */
    targetSinks?: readonly TargetSink[],
    /** Poll every this many ms. Default 1000. */
    intervalMs?: number,
    /** Histogram estimates cover this much time. Default 60 s (StatsManager's percentile window). */
    percentileWindowMs?: number,
    /** Per request to a server. Default 2000 ms. */
    timeoutMs?: number,
    now?: () => number
};

type NamedReading = {name: string, reading: TargetReading};

/** A sink and the sources it shows, with the engine state it was last told. */
type Feed = {sink: TargetSink, sources: readonly Source[], state: EngineClientState | undefined};

export class TargetMonitor {
    private readonly sources: Source[];
    private readonly feeds: Feed[];
    private readonly now: () => number;
    private readonly intervalMs: number;
    private readonly windowMs: number;
    private timer: NodeJS.Timeout | undefined;
    private polling: Promise<void> | undefined;
    private stopped = false;

    constructor(private readonly options: TargetMonitorOptions) {
        if (options.targets.length === 0)
            throw new RangeError("watch at least one server");
        const targetSinks = options.targetSinks ?? [];
        if (options.targetSinks !== undefined && targetSinks.length !== options.targets.length)
            throw new RangeError(`${targetSinks.length} target sinks for ${options.targets.length} servers: give one per server`);
        this.now = options.now ?? Date.now;
        this.intervalMs = options.intervalMs ?? 1000;
        this.windowMs = options.percentileWindowMs ?? 60_000;
        const now = this.now();
        this.sources = options.targets.map((target) => ({
            target: {...target, url: target.url.replace(/\/+$/, "")},
            kind: target.kind === undefined || target.kind === "auto" ? undefined : target.kind,
            model: undefined, modelLookup: new ModelIdLookup(this.now), status: "connecting", since: now, error: null, replicas: new Map()
        }));
        this.feeds = [
            {sink: options.sink, sources: this.sources, state: undefined},
            ...targetSinks.map((sink, i) => ({sink, sources: [this.sources[i]!], state: undefined}))
        ];
        for (const feed of this.feeds) {
            this.setEngineState(feed, "loading");
            feed.sink.onTarget(viewOf(feed.sources));
        }
    }

    /** Polls now and then every `intervalMs` until `stop()`. */
    start(): void {
        const loop = () => {
            if (this.stopped)
                return;
            this.polling = this.pollOnce().finally(() => {
                if (!this.stopped)
                    this.timer = setTimeout(loop, this.intervalMs);
            });
        };
        loop();
    }

    async stop(): Promise<void> {
        this.stopped = true;
        clearTimeout(this.timer);
        await this.polling;
    }

    /** One round: every server read once, at once, then one step into each sink. Never throws. */
    async pollOnce(): Promise<void> {
        await Promise.all(this.sources.map(async (source) => await this.read(source)));
        const now = this.now();
        for (const source of this.sources)
            for (const replica of source.replicas.values())
                takeIncrease(replica);
        for (const feed of this.feeds) {
            const step = stepOf(feed.sources, now);
            this.setEngineState(feed, engineStateOf(feed.sources));
            feed.sink.onOutputs(step);
            feed.sink.onTarget(viewOf(feed.sources));
        }
    }

    /** The watched servers as the panel shows them: all of them, or (`target`: its index) one. */
    view(target?: number): TargetView {
        if (target === undefined)
            return viewOf(this.sources);
        const source = this.sources[target];
        if (source === undefined)
            throw new RangeError(`no server ${target} of ${this.sources.length}`);
        return viewOf([source]);
    }

    private async read(source: Source): Promise<void> {
        const now = () => this.now();
        const http: TargetGetOptions = {
            ...(source.target.apiKey !== undefined ? {apiKey: source.target.apiKey} : {}),
            ...(this.options.timeoutMs !== undefined ? {timeoutMs: this.options.timeoutMs} : {})
        };
        try {
            source.kind ??= await probeTarget(source.target.url, http);
            const readings = await this.readKind(source, source.kind, http);
            const t = now();
            for (const {name, reading} of readings) {
                let replica = source.replicas.get(name);
                if (replica === undefined)
                    source.replicas.set(name, replica = {name, reading: undefined, counters: new Map(), increase: undefined, history: []});
                replica.reading = reading;
                replica.history.push({t, histograms: reading.histograms});
                while (replica.history.length > 1 && replica.history[1]!.t <= t - this.windowMs)
                    replica.history.shift();
            }
            source.model = readings[0]?.reading.model ?? source.model;
            this.setStatus(source, "up", null);
        } catch (error) {
            const kind = error instanceof TargetReadError ? error.kind : "bad";
            this.setStatus(source, kind === "unreachable" ? "unreachable" : kind === "auth" ? "unauthorized" : "error", errorMessage(error));
            if (kind === "unreachable")
                source.modelLookup.forget(); // down: whatever answers there next is asked for its model at once
            for (const replica of source.replicas.values())
                replica.reading = undefined;
        }
    }

    private async readKind(source: Source, kind: TargetKind, http: TargetGetOptions): Promise<NamedReading[]> {
        const url = source.target.url;
        switch (kind) {
            case "llamacpp": return [{name: url, reading: await readLlamaCpp(url, http, async () => source.model ?? await source.modelLookup.read(url, http))}];
            case "ollama": return [{name: url, reading: await readOllama(url, http)}];
            case "vllm": {
                const ranks = await readVllm(url, http);
                return ranks.map(({engine, reading}) => ({name: ranks.length > 1 ? `${url}#${engine}` : url, reading}));
            }
            case "openai":
                throw new TargetReadError(`${url} only speaks the OpenAI API, which has nothing to poll: ` +
                    "watch its traffic with `inference-monitor proxy --upstream` instead", "bad");
        }
    }

    private setStatus(source: Source, status: TargetStatus, error: string | null): void {
        if (source.status !== status)
            source.since = this.now();
        source.status = status;
        source.error = error;
    }

    private setEngineState(feed: Feed, state: EngineClientState): void {
        if (state === feed.state)
            return;
        feed.state = state;
        feed.sink.onEngineState(state);
    }
}
