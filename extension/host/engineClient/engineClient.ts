import {randomUUID} from "node:crypto";
import {EventEmitter} from "node:events";
import {nowMs} from "../../../common/clock.js";
import type {EngineOptions} from "../../../protocol/engineOptions.js";
import {defaultEngineOptions} from "../../../protocol/engineOptions.js";
import {
    parseEngineToHost, parseHostToEngine, type EngineErrorInfo, type EngineInfo, type EngineToHost, type GenerateRequest,
    type RequestEvent, type StepStats
} from "../../../protocol/engineMessages.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {ChildProcessTransport} from "./childProcessTransport.js";
import type {EngineExit, EngineTransport} from "./engineTransport.js";
import type {HostRequestEvent} from "./hostRequestEvents.js";
import {InProcessTransport} from "./inProcessTransport.js";
import {RequestHandle, type RequestResult} from "./requestHandle.js";
import {StatsChannelServer, type ReceivedSnapshot} from "./statsChannelServer.js";

export type EngineMode = "process" | "inProcess";

/** Options of an EngineClient: the engine's own options plus how to run it. */
export type EngineClientOptions = Omit<EngineOptions, "statsChannel"> & {
    /** Run the engine in its own process (default) or inside this one. */
    mode?: EngineMode,
    /** Engine entry file for process mode. Default: the bundled `engineMain.js`. */
    engineEntryFile?: string,
    /** Give up waiting for the model to load after this long. Default 10 minutes. */
    startTimeoutMs?: number,
    /** Ping/pong rounds to measure the engine's clock offset. Default 5. */
    clockSyncRounds?: number
};

export type EngineClientState = "stopped" | "loading" | "ready" | "crashed";

export type RejectedMessage = {source: "engine" | "host" | "stats", reason: string};

export type EngineClientEvents = {
    state: [EngineClientState],
    loading: [number],
    ready: [EngineInfo],
    /** Every lifecycle event of every request, on the host clock. */
    request: [HostRequestEvent],
    /** Per-step engine stats (host clock), carried on the outputs. */
    step: [StepStats],
    /** A stats-channel snapshot (worker clock is the same machine clock). */
    stats: [ReceivedSnapshot],
    rejected: [RejectedMessage],
    exit: [EngineExit],
    log: ["info" | "warn" | "error", string]
};

/** What a caller passes to `generate`: a request without an id (one is assigned) unless given. */
export type GenerateInput = Omit<GenerateRequest, "id"> & {id?: string};

/** How requests have ended, since this client was created (survives engine restarts). */
export type RequestLedger = {
    arrived: number,
    inFlight: number,
    byReason: Record<RequestResult["reason"], number>
};

type InFlight = {
    handle: RequestHandle,
    arrival: number,
    text: string,
    promptTokens: number,
    preemptions: number,
    timings: Partial<RequestResult["timings"]>,
    tokenTimes: number[],
    deliveries: Array<{t: number, tokens: number}>
};

export class EngineLoadError extends Error {
    override readonly name = "EngineLoadError";
    constructor(message: string, readonly code?: string) {
        super(message);
    }
}

/**
 * The host's handle on an engine: spawns it (or runs it in-process), hands it the stats channel,
 * measures the clock offset, sends requests and turns the engine's outputs into streamed results and
 * lifecycle events. If the engine dies, every request in flight ends at once with reason `error`.
 */
export class EngineClient extends EventEmitter<EngineClientEvents> {
    private transport: EngineTransport | undefined;
    private statsServer: StatsChannelServer | undefined;
    private readonly inFlight = new Map<string, InFlight>();
    private currentState: EngineClientState = "stopped";
    private engineInfo: EngineInfo | undefined;
    /** engine clock − host clock, ms. */
    private offsetMs = 0;
    private pendingPongs = new Map<number, (pong: {hostTime: number, engineTime: number}) => void>();
    private pingSeq = 0;
    private loadError: EngineLoadError | undefined;
    private readonly ledgerCounts: RequestLedger = {arrived: 0, inFlight: 0, byReason: {stop: 0, length: 0, abort: 0, error: 0}};
    rejectedCount = 0;

    constructor(readonly options: EngineClientOptions = {}) {
        super();
    }

    get state(): EngineClientState {
        return this.currentState;
    }

    get info(): EngineInfo | undefined {
        return this.engineInfo;
    }

    get mode(): EngineMode {
        return this.options.mode ?? "process";
    }

    /** Engine clock minus host clock, as measured at the last start (0 in-process). */
    get clockOffsetMs(): number {
        return this.offsetMs;
    }

    get ledger(): RequestLedger {
        return {...this.ledgerCounts, inFlight: this.inFlight.size, byReason: {...this.ledgerCounts.byReason}};
    }

    /** Starts the engine and resolves once the model is loaded and the clocks are synced. */
    async start(): Promise<EngineInfo> {
        if (this.transport !== undefined)
            throw new Error("engine already started");
        const statsIntervalMs = this.options.statsIntervalMs ?? defaultEngineOptions.statsIntervalMs;
        const engineOptions: EngineOptions = {...stripClientOptions(this.options), statsIntervalMs};
        if (statsIntervalMs > 0) {
            const server = await StatsChannelServer.listen();
            this.statsServer = server;
            server.on("snapshot", (snapshot) => this.emit("stats", snapshot));
            server.on("rejected", (reason) => this.reject("stats", reason));
            engineOptions.statsChannel = {url: server.url, secret: server.secret};
        }
        const transport = this.mode === "inProcess"
            ? new InProcessTransport(engineOptions)
            : new ChildProcessTransport(engineOptions, this.options.engineEntryFile);
        this.transport = transport;
        this.setState("loading");

        const ready = new Promise<EngineInfo>((resolve, reject) => {
            const timer = setTimeout(() => reject(new EngineLoadError("timed out waiting for the engine to load the model")),
                this.options.startTimeoutMs ?? 10 * 60_000);
            this.once("ready", (info) => {
                clearTimeout(timer);
                resolve(info);
            });
            transport.onExit((exit) => {
                clearTimeout(timer);
                reject(this.loadError ?? new EngineLoadError(describeEarlyExit(exit, transport.recentStderr())));
            });
        });
        transport.onMessage((message, validated) => this.receive(message, validated));
        transport.onExit((exit) => this.onEngineExit(transport, exit));
        const statsHello = this.statsServer === undefined ? undefined : waitForHello(this.statsServer, 5000);
        try {
            const info = await ready;
            if (statsHello !== undefined && !await statsHello)
                this.emit("log", "warn", "the engine's stats channel did not connect within 5 s; stats will start when it does");
            if (this.mode === "process")
                this.offsetMs = await this.measureClockOffset(this.options.clockSyncRounds ?? 5);
            this.setState("ready");
            return info;
        } catch (error) {
            await this.stop();
            throw error;
        }
    }

    /** Sends a request; text streams through the handle, which resolves with the result. */
    generate(input: GenerateInput): RequestHandle {
        const id = input.id ?? randomUUID();
        if (this.inFlight.has(id))
            throw new Error(`duplicate request id ${JSON.stringify(id)}: it is still in flight`);
        const handle = new RequestHandle(id, (requestId) => this.cancel(requestId));
        const arrival = nowMs();
        const request: GenerateRequest = {...input, id};
        const entry: InFlight = {handle, arrival, text: "", promptTokens: 0, preemptions: 0, timings: {arrival}, tokenTimes: [], deliveries: []};
        this.ledgerCounts.arrived++;
        this.inFlight.set(id, entry);
        this.emit("request", {kind: "arrival", id, t: arrival, priority: input.priority ?? 0, maxTokens: input.maxTokens});

        let problem: string | undefined;
        try {
            parseHostToEngine({type: "generate", request});
        } catch (error) {
            problem = `invalid request: ${errorMessage(error)}`;
        }
        if (problem === undefined && (this.transport === undefined || this.currentState === "crashed" || this.currentState === "stopped"))
            problem = "the engine is not running";
        if (problem !== undefined)
            queueMicrotask(() => this.finishLocally(id, "error", problem));
        else
            this.transport!.send({type: "generate", request});
        return handle;
    }

    cancel(id: string): void {
        if (this.inFlight.has(id))
            this.transport?.send({type: "cancel", id});
    }

    async stop(): Promise<void> {
        const transport = this.transport;
        if (transport !== undefined)
            await transport.shutdown(3000);
        await this.statsServer?.close();
        this.statsServer = undefined;
        this.transport = undefined;
        this.failInFlight("engine stopped");
        this.setState("stopped");
    }

    async restart(): Promise<EngineInfo> {
        await this.stop();
        return await this.start();
    }

    /** Stats-channel frames refused so far (bad secret, malformed, oversized). */
    get statsRejectedCount(): number {
        return this.statsServer?.rejectedCount ?? 0;
    }

    get statsUrl(): string | undefined {
        return this.statsServer?.url;
    }

    private receive(raw: unknown, validated: boolean): void {
        let message: EngineToHost;
        try {
            message = validated ? raw as EngineToHost : parseEngineToHost(raw);
        } catch (error) {
            this.reject("host", `malformed message from the engine: ${errorMessage(error)}`);
            return;
        }
        switch (message.type) {
            case "outputs": return this.onOutputs(message.events, message.step);
            case "loading": this.emit("loading", message.progress); return;
            case "ready":
                this.engineInfo = message.info;
                this.emit("ready", message.info);
                return;
            case "loadFailed": this.loadError = toLoadError(message.error); return;
            case "pong": this.pendingPongs.get(message.seq)?.(message); return;
            case "rejected": this.reject("engine", message.reason); return;
            case "log": this.emit("log", message.level, message.message); return;
        }
    }

    private onOutputs(events: RequestEvent[], step: StepStats): void {
        const receivedAt = nowMs();
        const toHost = -this.offsetMs;
        for (const event of events) {
            const entry = this.inFlight.get(event.id);
            if (entry === undefined) {
                this.reject("host", `output for unknown request ${JSON.stringify(event.id)}`);
                continue;
            }
            if (event.kind === "tokens") {
                const times = toHost === 0 ? event.times : event.times.map((t) => t + toHost);
                this.onTokens(entry, event.text, times, receivedAt);
                this.emit("request", {...event, times, receivedAt});
                continue;
            }
            const t = event.t + toHost;
            switch (event.kind) {
                case "inputProcessed":
                    entry.timings.inputProcessed = t;
                    entry.promptTokens = event.promptTokens;
                    break;
                case "queued": entry.timings.queued ??= t; break;
                case "scheduled": entry.timings.scheduled ??= t; break;
                case "preempted": entry.preemptions++; break;
                case "finished": break;
            }
            this.emit("request", {...event, t, receivedAt});
            if (event.kind === "finished")
                this.complete(event.id, entry, {reason: event.reason, finished: t, promptTokens: event.promptTokens,
                    generatedTokens: event.generatedTokens, receivedAt, ...(event.error !== undefined ? {error: event.error} : {})});
        }
        this.emit("step", {...step, t: step.t + toHost});
    }

    private onTokens(entry: InFlight, text: string, times: number[], receivedAt: number): void {
        if (times.length > 0) {
            entry.timings.firstToken ??= times[0];
            entry.timings.lastToken = times[times.length - 1];
            entry.tokenTimes.push(...times);
        }
        entry.timings.firstDelivered ??= receivedAt;
        entry.deliveries.push({t: receivedAt, tokens: times.length});
        entry.text += text;
        entry.handle.pushChunk({text, tokens: times.length, deliveredAt: receivedAt});
    }

    private complete(id: string, entry: InFlight, end: {reason: RequestResult["reason"], finished: number, promptTokens: number,
        generatedTokens: number, receivedAt: number, error?: string}): void {
        this.inFlight.delete(id);
        this.ledgerCounts.byReason[end.reason]++;
        const result: RequestResult = {
            id, text: entry.text, reason: end.reason, promptTokens: end.promptTokens || entry.promptTokens,
            generatedTokens: end.generatedTokens, preemptions: entry.preemptions,
            timings: {...entry.timings, arrival: entry.arrival, finished: end.finished, lastDelivered: end.receivedAt},
            tokenTimes: entry.tokenTimes, deliveries: entry.deliveries
        };
        if (end.error !== undefined)
            result.error = end.error;
        entry.handle.complete(result);
    }

    /** Ends a request on the host side (engine gone, or the request never reached it). */
    private finishLocally(id: string, reason: RequestResult["reason"], error: string): void {
        const entry = this.inFlight.get(id);
        if (entry === undefined)
            return;
        const t = nowMs();
        this.emit("request", {kind: "finished", id, t, reason, promptTokens: entry.promptTokens,
            generatedTokens: entry.tokenTimes.length, error, receivedAt: t});
        this.complete(id, entry, {reason, finished: t, promptTokens: entry.promptTokens, generatedTokens: entry.tokenTimes.length, receivedAt: t, error});
    }

    private failInFlight(error: string): void {
        for (const id of [...this.inFlight.keys()])
            this.finishLocally(id, "error", error);
    }

    private onEngineExit(transport: EngineTransport, exit: EngineExit): void {
        if (this.transport !== transport)
            return;
        const wasRunning = this.currentState === "ready" || this.currentState === "loading";
        this.failInFlight(`engine exited (${exit.description})`);
        for (const resolve of this.pendingPongs.values())
            resolve({hostTime: Number.NaN, engineTime: Number.NaN});
        this.emit("exit", exit);
        if (wasRunning && !(exit.code === 0 && exit.signal === null)) {
            this.transport = undefined;
            void this.statsServer?.close();
            this.statsServer = undefined;
            const stderr = transport.recentStderr();
            this.emit("log", "error", `engine exited (${exit.description})${stderr ? `: ${stderr.split("\n").slice(-5).join("\n")}` : ""}`);
            this.setState("crashed");
        }
    }

    /** Min-RTT ping/pong: offset = engineTime − midpoint of the round trip with the smallest RTT. */
    private async measureClockOffset(rounds: number): Promise<number> {
        let best: {rtt: number, offset: number} | undefined;
        for (let i = 0; i < rounds; i++) {
            const seq = this.pingSeq++;
            const sent = nowMs();
            const pong = await new Promise<{hostTime: number, engineTime: number}>((resolve) => {
                this.pendingPongs.set(seq, resolve);
                this.transport?.send({type: "ping", seq, hostTime: sent});
            });
            this.pendingPongs.delete(seq);
            const received = nowMs();
            if (!Number.isFinite(pong.engineTime))
                break;
            const rtt = received - sent;
            if (best === undefined || rtt < best.rtt)
                best = {rtt, offset: pong.engineTime - (sent + received) / 2};
        }
        return best?.offset ?? 0;
    }

    private reject(source: RejectedMessage["source"], reason: string): void {
        this.rejectedCount++;
        this.emit("rejected", {source, reason});
    }

    private setState(state: EngineClientState): void {
        if (this.currentState === state)
            return;
        this.currentState = state;
        this.emit("state", state);
    }
}

/** Resolves true once the stats worker has said hello, false after `timeoutMs`. */
function waitForHello(server: StatsChannelServer, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        server.once("hello", () => {
            clearTimeout(timer);
            resolve(true);
        });
    });
}

function stripClientOptions(options: EngineClientOptions): EngineOptions {
    const {mode: _mode, engineEntryFile: _entry, startTimeoutMs: _timeout, clockSyncRounds: _rounds, ...engineOptions} = options;
    return engineOptions;
}

function toLoadError(error: EngineErrorInfo): EngineLoadError {
    return new EngineLoadError(error.message, error.code);
}

function describeEarlyExit(exit: EngineExit, stderr: string): string {
    const tail = stderr === "" ? "" : `\n${stderr.split("\n").slice(-10).join("\n")}`;
    return `the engine exited while loading the model (${exit.description})${tail}`;
}
