import {randomUUID} from "node:crypto";
import {nowMs} from "../../../common/clock.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {defaultEngineOptions, type EngineOptions} from "../../../protocol/engineOptions.js";
import {forgetGpuChoice, rememberGpuChoice, testedGpuChoice} from "./testedGpuChoices.js";
import {
    parseEngineToHost, parseHostToEngine, type ChatPromptInput, type EngineErrorInfo, type EngineInfo, type EngineToHost,
    type EmbedRequest, type GenerateRequest, type HostToEngine, type RequestEvent, type SlotAction, type StepStats, type TokenizerInfo
} from "../../../protocol/engineMessages.js";
import {maxClientLabelLength} from "../../../protocol/requestLifecycle.js";
import {ChildProcessTransport} from "./childProcessTransport.js";
import type {LoraAdapter} from "../../../protocol/loraAdapters.js";
import type {EngineClientState, EngineLogLevel, EngineObserver, RejectedMessage} from "./engineObserver.js";
import type {EngineStep} from "./engineStep.js";
import type {EngineExit, EngineTransport} from "./engineTransport.js";
import {InProcessTransport} from "./inProcessTransport.js";
import {checkModelLoadsInChildProcess, ModelLoadCheckError} from "./modelLoadCheck.js";
import {OutputProcessor} from "./outputProcessor.js";
import {RequestHandle} from "./requestHandle.js";
import {SequenceSlots, type SequenceSlot} from "./sequenceSlots.js";
import {StatsChannelServer} from "./statsChannelServer.js";

export type EngineMode = "process" | "inProcess";

/** Options of an EngineClient: the engine's own options plus how to run it. */
export type EngineClientOptions = Omit<EngineOptions, "statsChannel"> & {
    /** Run the engine in its own process (default) or inside this one. */
    mode?: EngineMode,
    /** Engine entry file for process mode, and for the check process of in-process mode. Default: the bundled `engineMain.js`. */
    engineEntryFile?: string,
    /** Give up waiting for the model to load after this long. Default 10 minutes. */
    startTimeoutMs?: number,
    /** Ping/pong rounds to measure the engine's clock offset. Default 5. */
    clockSyncRounds?: number
};

/**
 * What a caller passes to `generate`: a request without an id (one is assigned) unless given, and
 * the label of who sent it (stays on the host: the stats break requests down by it).
 */
export type GenerateInput = Omit<GenerateRequest, "id"> & {id?: string, client?: string};

/** What a caller passes to `embed`: as GenerateInput, an embed request without an id unless given, and its client. */
export type EmbedInput = Omit<EmbedRequest, "id"> & {id?: string, client?: string};

/** Token ids and each one's text. */
/** Token ids and (when asked for) each one's text; for a chat input also its prompt as text (the template's output). */
export type Tokenized = {tokens: number[], pieces: string[], text?: string};

/** A slot action done: the tokens the sequence held (saved, erased) or holds (restored), the file's bytes, how long it took. */
export type SlotActionResult = {tokens: number, bytes: number, ms: number};

/** A slot action the engine refused; `invalidRequest`: for its file or sequence, not for a fault of the engine. */
export class SlotActionError extends Error {
    constructor(message: string, readonly invalidRequest: boolean) {
        super(message);
    }
}

/** The messages that start a request. */
type SubmitMessage = Extract<HostToEngine, {type: "generate" | "embed"}>;

/** The client label of requests that do not say who sent them. */
export const defaultClientLabel = "local";

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
export class EngineClient {
    private transport: EngineTransport | undefined;
    private statsServer: StatsChannelServer | undefined;
    private readonly observers = new Set<EngineObserver>();
    private readonly handles = new Map<string, RequestHandle>();
    private readonly slots = new SequenceSlots(() => this.engineInfo?.loraAdapters ?? []);
    private readonly outputs = new OutputProcessor({
        onQueued: (id, promptTokens, promptTokenIds) => this.handles.get(id)?.markQueued(promptTokens, promptTokenIds),
        onPromptLogprobs: (id, scores) => this.handles.get(id)?.setPromptLogprobs(scores),
        onPromptProgress: (id, progress) => this.handles.get(id)?.pushPromptProgress(progress),
        onChunk: (id, chunk) => {
            this.slots.text(id, chunk.text);
            this.handles.get(id)?.pushChunk(chunk);
        },
        onFinished: (id, result) => {
            this.handles.get(id)?.complete(result);
            this.handles.delete(id);
        }
    });
    private currentState: EngineClientState = "stopped";
    private engineInfo: EngineInfo | undefined;
    /** engine clock − host clock, ms. */
    private offsetMs = 0;
    private pendingPongs = new Map<number, (pong: {hostTime: number, engineTime: number}) => void>();
    private readonly pendingCounts = new Map<number, {resolve: (count: number) => void, reject: (error: Error) => void}>();
    private readonly pendingTokenizations =
        new Map<number, {resolve: (value: Tokenized | TokenizerInfo | string) => void, reject: (error: Error) => void}>();
    private readonly pendingSlotActions =
        new Map<number, {action: SlotAction, sequence: number, resolve: (done: SlotActionResult) => void,
            reject: (error: Error) => void}>();
    private readonly pendingLoraChanges = new Map<number, {resolve: (adapters: LoraAdapter[]) => void, reject: (error: Error) => void}>();
    private countSeq = 0;
    private pingSeq = 0;
    private loadError: EngineLoadError | undefined;
    private onReadyOnce: ((info: EngineInfo) => void) | undefined;
    rejectedCount = 0;

    constructor(readonly options: EngineClientOptions = {}) {
        this.observe({onOutputs: (step) => this.slots.onStep(step)});
    }

    /** Calls the observer's methods from now on; returns the function that stops them. */
    observe(observer: EngineObserver): () => void {
        this.observers.add(observer);
        return () => this.observers.delete(observer);
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

    /** The request engine sequence `sequence` runs now, or last ran (undefined: none since the engine started). */
    sequenceSlot(sequence: number): SequenceSlot | undefined {
        return this.slots.slot(sequence);
    }

    /** The tokens engine sequence `sequence` holds since a slot action after its last request (undefined: none since). */
    sequenceHeldSinceAction(sequence: number): number | undefined {
        return this.slots.heldSinceAction(sequence);
    }

    /** Requests sent and not yet finished. */
    get inFlightCount(): number {
        return this.outputs.inFlightCount;
    }

    /** Requests sent that no sequence has taken yet. */
    get waitingCount(): number {
        return this.outputs.waitingCount;
    }

    /** Starts the engine and resolves once the model is loaded and the clocks are synced. */
    async start(): Promise<EngineInfo> {
        if (this.transport !== undefined)
            throw new Error("engine already started");
        if (this.mode === "inProcess")
            await this.checkModelOutOfProcess();
        this.slots.clear();
        const statsIntervalMs = this.options.statsIntervalMs ?? defaultEngineOptions.statsIntervalMs;
        const engineOptions: EngineOptions = {...stripClientOptions(this.options), statsIntervalMs};
        const gpuSetting = this.options.gpu ?? defaultEngineOptions.gpu;
        const tested = this.options.gpuTested ?? testedGpuChoice(gpuSetting);
        if (tested !== undefined)
            engineOptions.gpuTested = tested;
        if (statsIntervalMs > 0) {
            const server = await StatsChannelServer.listen();
            this.statsServer = server;
            server.on("snapshot", (snapshot) => this.notify((o) => o.onStatsSnapshot?.(snapshot)));
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
            this.onReadyOnce = (info) => {
                clearTimeout(timer);
                resolve(info);
            };
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
            rememberGpuChoice(gpuSetting, info);
            if (statsHello !== undefined && !await statsHello)
                this.log("warn", "the engine's stats channel did not connect within 5 s; stats will start when it does");
            if (this.mode === "process")
                this.offsetMs = await this.measureClockOffset(this.options.clockSyncRounds ?? 5);
            this.setState("ready");
            return info;
        } catch (error) {
            await this.stop();
            throw error;
        }
    }

    /** In-process, llama.cpp aborting on a bad file would kill the host: the file must first load in a child process. */
    private async checkModelOutOfProcess(): Promise<void> {
        this.setState("loading");
        try {
            const {engineEntryFile, startTimeoutMs} = this.options;
            await checkModelLoadsInChildProcess(stripClientOptions(this.options), engineEntryFile, startTimeoutMs);
        } catch (error) {
            this.setState("stopped");
            throw error instanceof ModelLoadCheckError ? new EngineLoadError(error.message, error.code) : error;
        }
    }

    /** Sends a request; text streams through the handle, which resolves with the result. */
    generate(input: GenerateInput): RequestHandle {
        const {client, id: givenId, ...fields} = input;
        const id = givenId ?? randomUUID();
        const request = {...fields, id};
        this.slots.sentRequest(request);
        return this.submit(id, client, input.priority ?? 0, input.maxTokens, {type: "generate", request});
    }

    /** Sends an embed request; the handle resolves with the vector in the result's `embedding` (no text streams). */
    embed(input: EmbedInput): RequestHandle {
        const {client, id: givenId, ...fields} = input;
        const id = givenId ?? randomUUID();
        return this.submit(id, client, 0, 0, {type: "embed", request: {...fields, id}});
    }

    private submit(id: string, client: string | undefined, priority: number, maxTokens: number, message: SubmitMessage): RequestHandle {
        const label = (client ?? defaultClientLabel).slice(0, maxClientLabelLength);
        const arrivalStep = this.outputs.arrive(id, label, nowMs(), priority, maxTokens);
        const handle = new RequestHandle(id, (requestId) => this.cancel(requestId), arrivalStep.iteration.arrived[0]!);
        this.handles.set(id, handle);
        this.notify((o) => o.onOutputs?.(arrivalStep));

        let problem: string | undefined;
        try {
            parseHostToEngine(message);
        } catch (error) {
            problem = `invalid request: ${errorMessage(error)}`;
        }
        if (problem === undefined && (this.transport === undefined || this.currentState === "crashed" || this.currentState === "stopped"))
            problem = "the engine is not running";
        if (problem !== undefined) {
            const why = problem;
            queueMicrotask(() => this.finishLocally([id], why));
        } else
            this.transport!.send(message);
        return handle;
    }

    /** How many tokens the model's own tokenizer makes of `text` (no special tokens added). */
    async countTokens(text: string): Promise<number> {
        const transport = this.readyTransport();
        const seq = this.countSeq++;
        return await new Promise<number>((resolve, reject) => {
            this.pendingCounts.set(seq, {resolve, reject});
            transport.send({type: "countTokens", seq, text});
        });
    }

    /**
     * Token ids (with `pieces`, each one's text too) of `text`, or of the prompt a chat request would evaluate (`chat`:
     * its messages and tools, rendered as the engine renders a request).
     */
    async tokenize(input: {text: string, specialTokens: boolean, asPrompt?: boolean} | {chat: ChatPromptInput},
        pieces = false): Promise<Tokenized> {
        const result = await this.askTokenizer((seq) => "text" in input
            ? {type: "tokenize", seq, text: input.text, specialTokens: input.specialTokens, pieces, ...input.asPrompt === true ? {asPrompt: true} : {}}
            : {type: "tokenize", seq, chat: input.chat, specialTokens: true, pieces});
        if (typeof result === "string" || !("tokens" in result))
            throw new Error("unexpected answer from the engine");
        return result;
    }

    /** The model's tokenizer: its BOS and EOS text, whether prompts begin with BOS, its chat template. */
    async tokenizerInfo(): Promise<TokenizerInfo> {
        const result = await this.askTokenizer((seq) => ({type: "tokenizerInfo", seq}));
        if (typeof result === "string" || !("addBos" in result))
            throw new Error("unexpected answer from the engine");
        return result;
    }

    /** The text of token ids (special tokens' text included); ids outside the vocabulary are refused. */
    async detokenize(tokens: number[]): Promise<string> {
        const result = await this.askTokenizer((seq) => ({type: "detokenize", seq, tokens}));
        if (typeof result !== "string")
            throw new Error("unexpected answer from the engine");
        return result;
    }

    private async askTokenizer(message: (seq: number) => HostToEngine): Promise<Tokenized | TokenizerInfo | string> {
        const transport = this.readyTransport();
        const seq = this.countSeq++;
        return await new Promise<Tokenized | TokenizerInfo | string>((resolve, reject) => {
            this.pendingTokenizations.set(seq, {resolve, reject});
            transport.send(message(seq));
        });
    }

    /**
     * llama-server's slot action on engine sequence `sequence`: save its state to `file`, restore it from `file`, or
     * erase it. Waits while a request runs there. Rejects with SlotActionError (its `invalidRequest`: the file or the
     * sequence was at fault, not the engine).
     */
    async slotAction(action: SlotAction, sequence: number, file?: string): Promise<SlotActionResult> {
        const transport = this.readyTransport();
        const seq = this.countSeq++;
        return await new Promise<SlotActionResult>((resolve, reject) => {
            this.pendingSlotActions.set(seq, {action, sequence, resolve, reject});
            transport.send({type: "slotAction", seq, action, sequence, ...file !== undefined ? {file} : {}});
        });
    }

    /**
     * llama-server's `POST /lora-adapters`: every adapter's new scale (by id). The engine applies them once no request
     * runs, starting none meanwhile; resolves with the adapters as they now run (also in `info`).
     */
    async setLoraScales(scales: readonly number[]): Promise<LoraAdapter[]> {
        const transport = this.readyTransport();
        const seq = this.countSeq++;
        return await new Promise<LoraAdapter[]>((resolve, reject) => {
            this.pendingLoraChanges.set(seq, {resolve, reject});
            transport.send({type: "setLoraScales", seq, scales: [...scales]});
        });
    }

    /** The transport to ask a running engine something on; throws while none is ready. */
    private readyTransport(): EngineTransport {
        const transport = this.transport;
        if (transport === undefined || this.currentState !== "ready")
            throw new Error("no model is running");
        return transport;
    }

    cancel(id: string): void {
        if (this.outputs.has(id))
            this.transport?.send({type: "cancel", id});
    }

    async stop(): Promise<void> {
        const transport = this.transport;
        if (transport !== undefined)
            await transport.shutdown(3000);
        await this.statsServer?.close();
        this.statsServer = undefined;
        this.transport = undefined;
        this.finishLocally(this.outputs.inFlightIds(), "engine stopped");
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
            case "loading": this.notify((o) => o.onLoading?.(message.progress)); return;
            case "ready":
                this.engineInfo = message.info;
                this.onReadyOnce?.(message.info);
                this.onReadyOnce = undefined;
                this.notify((o) => o.onEngineReady?.(message.info));
                return;
            case "loadFailed": this.loadError = toLoadError(message.error); return;
            case "pong": this.pendingPongs.get(message.seq)?.(message); return;
            case "tokenized":
            case "detokenized": {
                const pending = this.pendingTokenizations.get(message.seq);
                this.pendingTokenizations.delete(message.seq);
                if (message.error !== undefined)
                    pending?.reject(new Error(message.error));
                else if (message.type === "detokenized")
                    pending?.resolve(message.text);
                else
                    pending?.resolve({tokens: message.tokens, pieces: message.pieces,
                        ...message.text !== undefined ? {text: message.text} : {}});
                return;
            }
            case "tokenizerInfo": {
                const pending = this.pendingTokenizations.get(message.seq);
                this.pendingTokenizations.delete(message.seq);
                pending?.resolve(message.info);
                return;
            }
            case "tokenCount": {
                const pending = this.pendingCounts.get(message.seq);
                this.pendingCounts.delete(message.seq);
                if (message.count < 0)
                    pending?.reject(new Error(`could not count tokens: ${message.error ?? "unknown error"}`));
                else
                    pending?.resolve(message.count);
                return;
            }
            case "slotActionDone": {
                const pending = this.pendingSlotActions.get(message.seq);
                this.pendingSlotActions.delete(message.seq);
                if (message.error !== undefined)
                    pending?.reject(new SlotActionError(message.error, message.errorCode === "invalid_request"));
                else {
                    // Erased: it holds nothing; restored: the file's tokens; saved: what it held.
                    if (pending !== undefined && pending.action !== "save")
                        this.slots.slotAction(pending.sequence, pending.action === "erase" ? 0 : message.tokens);
                    pending?.resolve({tokens: message.tokens, bytes: message.bytes, ms: message.ms});
                }
                return;
            }
            case "loraScalesSet": {
                const pending = this.pendingLoraChanges.get(message.seq);
                this.pendingLoraChanges.delete(message.seq);
                if (this.engineInfo !== undefined) {
                    const before = this.engineInfo.loraAdapters;
                    this.engineInfo = {...this.engineInfo, loraAdapters: message.adapters};
                    // An applied change (new scales, or a failure on the way) made the engine forget what every sequence
                    // held; the scales already in force were answered without it.
                    if (message.error !== undefined || message.adapters.some((adapter, id) => adapter.scale !== before[id]?.scale))
                        for (let sequence = 0; sequence < this.engineInfo.parallel; sequence++)
                            this.slots.slotAction(sequence, 0);
                }
                if (message.error !== undefined)
                    pending?.reject(new Error(message.error));
                else
                    pending?.resolve(message.adapters);
                return;
            }
            case "rejected": this.reject("engine", message.reason); return;
            case "log": this.log(message.level, message.message); return;
        }
    }

    private onOutputs(events: RequestEvent[], stats: StepStats): void {
        const {step, unknownIds} = this.outputs.process(events, stats, -this.offsetMs, nowMs());
        for (const id of unknownIds)
            this.reject("host", `output for unknown request ${JSON.stringify(id)}`);
        this.notify((o) => o.onOutputs?.(step));
    }

    /** Ends requests on the host side (the engine is gone, or the request never reached it). */
    private finishLocally(ids: readonly string[], error: string): void {
        const step: EngineStep | undefined = this.outputs.finishLocally(ids, "error", error, nowMs());
        if (step !== undefined)
            this.notify((o) => o.onOutputs?.(step));
    }

    private onEngineExit(transport: EngineTransport, exit: EngineExit): void {
        if (this.transport !== transport)
            return;
        const wasRunning = this.currentState === "ready" || this.currentState === "loading";
        this.finishLocally(this.outputs.inFlightIds(), `engine exited (${exit.description})`);
        for (const resolve of this.pendingPongs.values())
            resolve({hostTime: Number.NaN, engineTime: Number.NaN});
        const pendingAsks = [...this.pendingTokenizations.values(), ...this.pendingSlotActions.values(),
            ...this.pendingLoraChanges.values()];
        for (const {reject} of pendingAsks)
            reject(new Error("the engine stopped"));
        this.pendingTokenizations.clear();
        this.pendingSlotActions.clear();
        this.pendingLoraChanges.clear();
        for (const {reject} of this.pendingCounts.values())
            reject(new Error(`engine exited (${exit.description})`));
        this.pendingCounts.clear();
        this.notify((o) => o.onEngineExit?.(exit));
        if (wasRunning && !(exit.code === 0 && exit.signal === null)) {
            this.transport = undefined;
            void this.statsServer?.close();
            this.statsServer = undefined;
            const stderr = transport.recentStderr();
            this.log("error", `engine exited (${exit.description})${stderr ? `: ${stderr.split("\n").slice(-5).join("\n")}` : ""}`);
            forgetGpuChoice(this.options.gpu ?? defaultEngineOptions.gpu);
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
        this.notify((o) => o.onRejected?.({source, reason}));
    }

    private log(level: EngineLogLevel, message: string): void {
        this.notify((o) => o.onLog?.(level, message));
    }

    private setState(state: EngineClientState): void {
        if (this.currentState === state)
            return;
        this.currentState = state;
        this.notify((o) => o.onEngineState?.(state));
    }

    private notify(call: (observer: EngineObserver) => void): void {
        for (const observer of this.observers)
            call(observer);
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
