import type {LlamaContextSequence, Token} from "./llamaTypes.js";
import {pieceLeavingATile, reusedWithTilePadding} from "./attentionTilePadding.js";
import {randomInt} from "node:crypto";
import {samplerSeed} from "./samplerSeed.js";
import {nowMs} from "../common/clock.js";
import {checkEngineOptions, defaultEngineOptions, defaultPrefillChunkTokens, type EngineOptions} from "../protocol/engineOptions.js";
import {loadModel, type LoadedModel} from "./modelLoader.js";
import {
    maxTopLogprobs, type EmbedRequest, type EngineInfo, type EngineToHost, type FinishReason, type GenerateRequest, type HostToEngine,
    type RequestErrorCode, type RequestEvent, type StepStats, type TokenLogprob
} from "../protocol/engineMessages.js";
import {errorMessage} from "../common/errorMessage.js";
import {
    type AnswerStart, hasChatTemplate, offeredTools, preloadChatWrapper, PromptInputError, reasoningSyntaxFor, renderChat, renderPrompt,
    toolCallSyntaxFor
} from "./promptRenderer.js";
import {ReasoningSplitter} from "./reasoning/reasoningSplitter.js";
import {ToolCallExtractor} from "./tools/toolCallExtractor.js";
import {invalidTools, parallelCalls, requiredTools} from "./tools/toolRequest.js";
import {StatsAgent} from "./stats/statsAgent.js";
import {CounterSlot} from "./stats/sharedCounters.js";
import {type StepMember, StepBarrier} from "./stepBarrier.js";
import {DecodePairSplit, splitsDecodePairs} from "./decodePairs.js";
import {generateTokens} from "./leanDecode.js";
import {StopStringMatcher} from "./stopStringMatcher.js";
import {StreamingDetokenizer} from "./streamingDetokenizer.js";
import {extraSampling, invalidSampling, type ExtraSampling} from "./samplingOptions.js";
import {jsonGrammarStop, ResponseFormatError, ResponseGrammars} from "./responseGrammar.js";
import {scoredPromptTokenLogprob, tokenLogprob} from "./tokenLogprobs.js";
import {WaitingQueue} from "./waitingQueue.js";
import {EmbeddingRunner} from "./embeddingRunner.js";
import {outOfVocabulary} from "./vocabularyCheck.js";
import {tokenizerInfo} from "./tokenizerInfo.js";
import {LineLimits} from "./lineLimits.js";
import {PrefillBudget} from "./prefillBudget.js";
import {PromptCache, type SavedPrompt} from "./promptCache.js";
import {LoraScaleChanges, scalesKey} from "./loraScaleChanges.js";
import {SlotActions} from "./slotActions.js";
import {truncatePrompt} from "./promptTruncation.js";

/**
 * How long sampled tokens may wait for a step member whose prompt was submitted after their batch before
 * they go out anyway: that prompt may be evaluating in a later batch, which can take seconds.
 */
const maxFlushHoldForPromptMs = 5;

/**
 * How long sampled tokens may wait for members whose work went in the same batch: their samples end within a
 * fraction of a millisecond of each other (each sequence's in its own native task), but a busy event loop
 * (the extension host's, in in-process mode) can deliver one several ms later. A bound, not an expected wait.
 */
const maxFlushHoldForSamplesMs = 250;

/**
 * The fewest shared leading tokens a request reuses from a sequence's cache. One is not worth it: evaluating a prompt
 * after one held token took longer than evaluating it whole from an empty sequence (89 prompt tokens, one llama.cpp
 * thread, 2-vCPU VM, 2026-12-07, medians of 24 interleaved pairs: demo `small` q4_0 51.2 vs 49.2 ms, `small` f16 144.2 vs
 * 141.5 ms, `medium` f16 666.1 vs 664.2 ms), where two or more held tokens mostly gained. Unrelated prompts share just
 * their BOS, so this is the common case of a prefix cache miss.
 */
const minReusedPrefix = 2;

/**
 * The share of a request's input a free sequence must hold as its prefix to be chosen for it (llama-server's
 * `--slot-prompt-similarity`, default 0.1); with none sharing more, the request goes to an empty sequence, else the least
 * recently used one, as llama-server's does. Otherwise a prompt sharing a few leading tokens (a chat template's opening,
 * the same first words) took the sequence of another conversation, whose next turn then found its cache gone: two
 * conversations on two sequences evaluated every turn whole (`npm run bench:prompt-cache -- --conversations 2 --parallel 2`
 * with the prompt cache off, 0.7 % of the later turns' prompt tokens cached).
 */
const minPromptSimilarity = 0.1;

/** Receives every message the engine sends to the host. */
export type EngineSink = (message: EngineToHost) => void;

type Slot = {
    sequence: LlamaContextSequence,
    request: ActiveRequest | undefined,
    /** When its last request ended (a counter): the least recently used free sequence is the one a restored state replaces. */
    lastUsed: number,
    /** The LoRA scales its tokens were computed with (`scalesKey`): only a request with the same scales reuses them. */
    loraKey: string
};

type ActiveRequest = {
    id: string,
    priority: number,
    preempted: boolean,
    arrivalSeq: number,
    maxTokens: number,
    temperature: number,
    topP: number | undefined,
    /**
     * The request's seed, else one drawn for it: node-llama-cpp's default is the current second, so requests with the
     * same prompt in the same second (the choices of `n`) sampled the same tokens.
     */
    seed: number,
    /** Top-k, min-p, penalties, logit bias, the JSON grammar: set once the request is accepted. */
    sampling: ExtraSampling,
    ignoreEos: boolean,
    /** GenerateRequest.reusePrefix. */
    reusePrefix: boolean,
    /** GenerateRequest.loraScales (undefined: the server's scales when it starts). */
    loraScales: readonly number[] | undefined,
    /** GenerateRequest.sequence: the only slot it may run on (undefined: any). */
    pinned: number | undefined,
    debugBlockMs: number,
    promptTokens: Token[],
    generated: Token[],
    slot: Slot | undefined,
    /** Leading tokens of the input already in the slot's KV cache when it started (prefix caching). */
    cachedTokens: number,
    /** A saved state taken from the prompt cache for this request, to restore on its sequence before its input goes in. */
    restore: SavedPrompt | undefined,
    /**
     * Whether its sequence holds only its own tokens yet: until the tail it does not keep is erased (after the prompt
     * cache saved it), the KV gauge counts only the kept prefix for it.
     */
    tailErased: boolean,
    stop: "cancel" | "preempt" | undefined,
    detokenizer: StreamingDetokenizer,
    stopStrings: StopStringMatcher,
    /** GenerateRequest.stopTokenIds (undefined: none) and minTokens (0: none). */
    stopTokenIds: ReadonlySet<number> | undefined,
    minTokens: number,
    /** The stop token that ended it. */
    stoppedBy: number | undefined,
    /** Whether the token that ends the answer (the end of text, a stop id) is output (GenerateRequest.includeStopString). */
    outputsStopToken: boolean,
    /** For a request offering tools: separates the answer's text from its tool calls. */
    toolCalls: ToolCallExtractor | undefined,
    /** For a chat request whose reasoning is separated (GenerateRequest.separateReasoning): reasoning vs answer. */
    reasoning: ReasoningSplitter | undefined,
    /** How the prompt ends for a template that opens a reasoning segment on every answer. */
    answerStart: AnswerStart | undefined,
    reasoningTokens: number,
    /** Alternatives to report per token (GenerateRequest.logprobs); undefined: no log-probabilities. */
    logprobs: number | undefined,
    /** Alternatives per prompt token when the prompt is scored (GenerateRequest.promptLogprobs); undefined: not scored. */
    promptLogprobs: number | undefined,
    /** Whether the scored prompt's log-probabilities went out (a preempted request resumes without scoring it again). */
    promptScored: boolean,
    /** Code completion's limits on lines (GenerateRequest.minIndent, maxGenerationMs), when asked for. */
    lineLimits: LineLimits | undefined,
    /** Whether token ids go out with the tokens (GenerateRequest.returnTokenIds). */
    returnTokenIds: boolean,
    /** Text, token times, log-probabilities and ids (`returnTokenIds`) produced since the last flush. */
    pendingText: string,
    pendingReasoning: string,
    pendingTimes: number[],
    pendingLogprobs: TokenLogprob[],
    pendingIds: number[]
};

const defaultTemperature = 0.8;

/**
 * Serves generation requests on one node-llama-cpp context: a priority waiting queue, N sequences
 * evaluated together (node-llama-cpp batches concurrent sequence evaluations), streamed text, the
 * request-lifecycle timestamps, and per-step stats carried on the same messages as the outputs.
 *
 * The same class runs in its own process (engine/main.ts) or inside the host (in-process mode).
 */
export class Engine {
    private readonly slots: Slot[];
    private readonly queue = new WaitingQueue<ActiveRequest>();
    private readonly barrier: StepBarrier;
    /** Set where two one-token decodes run faster as two batches than as one (decodePairs.ts). */
    private readonly pairSplit: DecodePairSplit | undefined;
    private readonly grammars: ResponseGrammars;
    private readonly requests = new Map<string, ActiveRequest>();
    /** Embed requests, on an embedding context of their own. */
    private readonly embeddings: EmbeddingRunner;
    /** llama-server's slot save, restore and erase on the sequences. */
    private readonly slotActions: SlotActions<Slot>;
    /** POST /lora-adapters: applied once no request runs; none starts while one waits. */
    private readonly loraChanges: LoraScaleChanges;
    /** The context is being switched to a waiting request's LoRA scales: nothing starts meanwhile. */
    private loraSwitching = false;
    /** KV cells in all: node-llama-cpp gives each sequence its own `contextSize` cells. */
    private readonly kvCapacity: number;
    /** The most tokens one request may hold: its sequence's cells. */
    private readonly sequenceCapacity: number;
    private arrivalSeq = 0;
    private pendingEvents: RequestEvent[] = [];
    private pendingTokenRequests = new Set<ActiveRequest>();
    private stepTokens = 0;
    /** Requests evaluating their input in chunks right now (some may wait for a step with budget left for them). */
    private prefilling = 0;
    /** The per-step prompt budget of chunked prefill, first come, first served; a request holds its place until its first token. */
    private readonly prefillBudget: PrefillBudget<ActiveRequest>;
    /** Running requests that have their first token (members of the steps that decode). */
    private decoding = 0;
    private flushScheduled = false;
    /** Sequences were freed while the rest of their step's samples were in flight: waiting requests start at its end. */
    private scheduleAtStepEnd = false;
    /** Requests that have left the steps and not yet freed their sequences (`run`'s end). */
    private ending = 0;
    /**
     * A flush found the step incomplete: it goes out when the step is (`onStepEnd`), or at this timer,
     * which bounds the wait for samples in flight (long) or for a prompt submitted later (short).
     */
    private heldFlush: {timer: NodeJS.Timeout, forSamples: boolean} | undefined;
    /** The vocabulary's end-of-generation tokens, once a request needed them (endOfGenerationTokens). */
    private endTokens: Token[] | undefined;
    private disposed = false;
    private pieceContextTokens: Token[] | undefined;
    private vramTimer: NodeJS.Timeout | undefined;
    private slotUses = 0;
    /** Prompt-cache saves and restores under way, and the requests whose own are done, waiting for them (`swapPromptState`). */
    private swapsInFlight = 0;
    private swapWaiters: Array<() => void> = [];

    private constructor(
        private readonly loaded: LoadedModel,
        private readonly sink: EngineSink,
        private readonly stats: StatsAgent | undefined,
        private readonly allowDebugRequests: boolean,
        private readonly prefixCache: boolean,
        prefillTokensPerStep: number,
        /** Requests that may wait at once (EngineOptions.maxWaitingRequests). */
        private readonly maxWaiting: number,
        /** Saved states of sequences whose tokens were replaced (EngineOptions.promptCacheMiB); undefined: off. */
        private readonly promptCache: PromptCache | undefined
    ) {
        this.prefillBudget = new PrefillBudget(prefillTokensPerStep);
        this.barrier = new StepBarrier(loaded.context.batchSize, {
            onStepEnd: () => this.onStepEnd(),
            // Not where a step of two goes as two batches (decodePairs.ts): those go through node-llama-cpp's dispatch, which splits them.
            mayDecodeAhead: () => this.prefilling === 0 && this.queue.length === 0 &&
                !(this.pairSplit !== undefined && this.barrier.memberCount === 2)
        });
        this.pairSplit = splitsDecodePairs(loaded.decodePairCost) ? DecodePairSplit.of(loaded.context) : undefined;
        this.grammars = new ResponseGrammars(loaded.llama, loaded.model, loaded.LlamaGrammarEvaluationState);
        this.sequenceCapacity = loaded.context.contextSize;
        this.kvCapacity = this.sequenceCapacity * loaded.context.totalSequences;
        this.slots = Array.from(
            {length: loaded.context.totalSequences},
            (): Slot => ({sequence: loaded.context.getSequence(), request: undefined, lastUsed: 0,
                loraKey: scalesKey(loaded.info.loraAdapters.map((adapter) => adapter.scale))})
        );
        stats?.counters.set(CounterSlot.kvCapacityTokens, this.kvCapacity);
        const {threads, model: {vocabularySize}} = loaded.info;
        this.slotActions = new SlotActions<Slot>({reply: (done) => this.sink(done), maxTokens: this.sequenceCapacity, vocabularySize,
            onSlotFree: () => this.schedule(), held: () => this.loraChanges.holding || this.loraSwitching});
        this.loraChanges = new LoraScaleChanges(loaded.info.loraAdapters, {context: loaded.context, reply: (done) => this.sink(done),
            forgetCachedStates: async () => {
                for (const slot of this.slots)
                    await slot.sequence.clearHistory();
                await this.promptCache?.clear();
            }});
        this.embeddings = new EmbeddingRunner(loaded.model, this.sequenceCapacity, threads, vocabularySize, (event) => {
            if (event.kind === "inputProcessed")
                this.stats?.counters.add(CounterSlot.promptTokensTotal, event.promptTokens);
            this.emit(event);
        });
    }

    /** Loads the model and reports `loading` progress, then `ready` (or `loadFailed`, returning undefined). */
    static async start(options: EngineOptions, sink: EngineSink): Promise<Engine | undefined> {
        let loaded: LoadedModel;
        try {
            checkEngineOptions(options);
            loaded = await loadModel(options, (progress) => sink({type: "loading", progress}));
            await preloadChatWrapper(loaded.model);
        } catch (error) {
            const err = error instanceof Error ? error : new Error(String(error));
            const code = (err as {code?: unknown}).code;
            sink({type: "loadFailed", error: {name: err.name, message: err.message, ...(typeof code === "string" ? {code} : {})}});
            return undefined;
        }
        const statsIntervalMs = options.statsIntervalMs ?? defaultEngineOptions.statsIntervalMs;
        const stats = statsIntervalMs > 0 && options.statsChannel !== undefined
            ? new StatsAgent(options.statsChannel, statsIntervalMs)
            : undefined;
        const prefillBudget = options.prefillChunkTokens ?? defaultPrefillChunkTokens(loaded.info.backend);
        const promptCache = await createPromptCache(loaded.info.promptCacheMiB, sink);
        const engine = new Engine(loaded, sink, stats, options.allowDebugRequests ?? false, loaded.info.prefixCache, prefillBudget,
            options.maxWaitingRequests ?? defaultEngineOptions.maxWaitingRequests, promptCache);
        const info: EngineInfo = {...loaded.info, model: {...loaded.info.model, reasoning: reasoningSyntaxFor(loaded.model) !== undefined},
            promptCacheMiB: promptCache === undefined ? 0 : loaded.info.promptCacheMiB,
            prefillChunkTokens: prefillBudget,
            statsIntervalMs: stats === undefined ? 0 : statsIntervalMs};
        if (stats !== undefined) {
            stats.setVram(info.vramUsedBytes, info.vramTotalBytes);
            if (info.backend !== "cpu")
                engine.pollVram(stats, statsIntervalMs);
        }
        sink({type: "ready", info});
        const pairs = loaded.decodePairCost;
        if (engine.pairSplit !== undefined && pairs !== undefined)
            sink({type: "log", level: "info", message: "two requests decode in two one-token batches: here a two-token batch took " +
                `${pairs.pairMs.toFixed(1)} ms, a one-token batch ${pairs.singleMs.toFixed(1)} ms (engine/decodePairs.ts)`});
        return engine;
    }

    /** Handles one validated message from the host. */
    handle(message: HostToEngine): void {
        switch (message.type) {
            case "generate": this.admit(message.request); break;
            case "embed": this.embed(message.request); break;
            case "cancel": this.cancel(message.id); break;
            case "ping": this.sink({type: "pong", seq: message.seq, hostTime: message.hostTime, engineTime: nowMs()}); break;
            case "countTokens": this.countTokens(message.seq, message.text); break;
            case "tokenize": this.tokenize(message); break;
            case "detokenize": this.detokenize(message.seq, message.tokens); break;
            case "slotAction": this.slotActions.submit(this.slots[message.sequence], message); break;
            case "setLoraScales":
                this.loraChanges.submit(message);
                this.schedule();
                break;
            case "tokenizerInfo": this.sink({type: "tokenizerInfo", seq: message.seq, info: tokenizerInfo(this.loaded.model)}); break;
            case "shutdown": void this.dispose(); break;
        }
    }

    /** The model's own tokenizer on `text` (as a prompt's text is tokenized: no special tokens). */
    private countTokens(seq: number, text: string): void {
        try {
            this.sink({type: "tokenCount", seq, count: this.loaded.model.tokenize(text, false).length});
        } catch (error) {
            this.sink({type: "tokenCount", seq, count: -1, error: errorMessage(error)});
        }
    }

    /**
     * Token ids (and with `pieces` each one's text): of `text`, or of the prompt a chat request would evaluate (as a
     * request without a grammar renders it: opened into the reasoning where the template opens it).
     */
    private tokenize({seq, text, chat, specialTokens, pieces, asPrompt}: Extract<HostToEngine, {type: "tokenize"}>): void {
        const model = this.loaded.model;
        try {
            const opens = reasoningSyntaxFor(model)?.opensOnAnswerStart === true;
            const rendered = chat !== undefined ? renderChat(model, chat, opens ? "open" : undefined) : undefined;
            const tokens = rendered !== undefined ? rendered.tokens
                : asPrompt === true ? renderPrompt(model, {prompt: text ?? ""}) : model.tokenize(text ?? "", specialTokens);
            const context = pieces ? this.pieceContext() : [];
            this.sink({type: "tokenized", seq, tokens, pieces: pieces ? tokens.map((token) => model.detokenize([token], true, context)) : [],
                ...rendered !== undefined ? {text: rendered.text} : {}});
        } catch (error) {
            this.sink({type: "tokenized", seq, tokens: [], pieces: [], error: errorMessage(error)});
        }
    }

    /**
     * A token to detokenize after, so that text reads as llama.cpp's server gives it (its pieces joined): at the
     * start of a text a SentencePiece tokenizer drops the first piece's leading space, and node-llama-cpp with it.
     */
    private pieceContext(): Token[] {
        return this.pieceContextTokens ??= this.loaded.model.tokenize("a", false).slice(-1);
    }

    /** Text of token ids; an id outside the vocabulary is refused here (llama.cpp would abort the process on it). */
    private detokenize(seq: number, tokens: number[]): void {
        const refused = outOfVocabulary(tokens, this.loaded.info.model.vocabularySize);
        if (refused !== undefined)
            return this.sink({type: "detokenized", seq, text: "", error: refused});
        try {
            this.sink({type: "detokenized", seq, text: this.loaded.model.detokenize(tokens as Token[], true, this.pieceContext())});
        } catch (error) {
            this.sink({type: "detokenized", seq, text: "", error: errorMessage(error)});
        }
    }

    get runningCount(): number {
        let running = 0;
        for (const slot of this.slots)
            if (slot.request !== undefined) running++;
        return running;
    }

    /** VRAM is read on the main thread (a native call); the worker reports the latest reading. */
    private pollVram(stats: StatsAgent, intervalMs: number): void {
        this.vramTimer = setInterval(() => {
            void this.loaded.llama.getVramState().then((vram) => stats.setVram(vram.used, vram.total), () => undefined);
        }, intervalMs);
        this.vramTimer.unref();
    }

    async dispose(): Promise<void> {
        if (this.disposed)
            return;
        this.disposed = true;
        clearInterval(this.vramTimer);
        for (const request of this.queue.drain())
            this.finish(request, "abort", "engine shutting down");
        this.slotActions.dispose();
        for (const slot of this.slots)
            if (slot.request !== undefined) slot.request.stop = "cancel";
        this.flush(true);
        await this.embeddings.dispose();
        this.flush(true);
        await this.stats?.dispose();
        await this.loaded.context.dispose();
        await this.loaded.model.dispose();
        await this.loaded.llama.dispose();
        this.promptCache?.dispose();
    }

    /** A request id already in use (by a generation or an embedding) is rejected: true. */
    private rejectedAsDuplicate(id: string): boolean {
        if (!this.requests.has(id) && !this.embeddings.has(id))
            return false;
        this.sink({type: "rejected", reason: `duplicate request id ${JSON.stringify(id)}`});
        return true;
    }

    private embed(request: EmbedRequest): void {
        if (!this.rejectedAsDuplicate(request.id))
            this.embeddings.submit(request);
    }

    private admit(request: GenerateRequest): void {
        if (this.rejectedAsDuplicate(request.id))
            return;
        const active: ActiveRequest = {
            id: request.id,
            priority: request.priority ?? 0,
            preempted: false,
            arrivalSeq: this.arrivalSeq++,
            maxTokens: request.maxTokens,
            temperature: request.temperature ?? defaultTemperature,
            topP: request.topP,
            seed: request.seed ?? randomInt(2 ** 31),
            sampling: {},
            ignoreEos: request.ignoreEos ?? false,
            reusePrefix: request.reusePrefix ?? true,
            loraScales: request.loraScales,
            pinned: request.sequence,
            debugBlockMs: this.allowDebugRequests ? request.debugBlockMs ?? 0 : 0,
            promptTokens: [],
            generated: [],
            slot: undefined,
            cachedTokens: 0,
            restore: undefined,
            tailErased: false,
            stop: undefined,
            detokenizer: new StreamingDetokenizer(this.loaded.model, request.outputSpecialTokens === true),
            stopStrings: new StopStringMatcher([...request.stop ?? [], ...request.responseFormat !== undefined && request.responseFormat.type !== "grammar"
                ? [jsonGrammarStop] : []], request.includeStopString === true),
            stopTokenIds: request.stopTokenIds !== undefined && request.stopTokenIds.length > 0 ? new Set(request.stopTokenIds) : undefined,
            minTokens: request.minTokens ?? 0,
            stoppedBy: undefined,
            outputsStopToken: request.includeStopString === true,
            toolCalls: undefined,
            reasoning: undefined,
            answerStart: undefined,
            reasoningTokens: 0,
            logprobs: request.logprobs,
            promptLogprobs: request.promptLogprobs,
            promptScored: false,
            lineLimits: request.minIndent !== undefined || request.maxGenerationMs !== undefined
                ? new LineLimits(request.minIndent ?? 0, request.maxGenerationMs ?? 0) : undefined,
            returnTokenIds: request.returnTokenIds === true,
            pendingText: "",
            pendingReasoning: "",
            pendingTimes: [],
            pendingLogprobs: [],
            pendingIds: []
        };
        this.requests.set(active.id, active);
        if (this.disposed)
            return this.finish(active, "abort", "engine shutting down");
        const invalid = this.invalidLoraScales(request) ?? invalidParameter(request, this.allowDebugRequests) ??
            outOfVocabulary(request.promptTokens ?? [], this.loaded.info.model.vocabularySize) ??
            invalidSampling(request, this.loaded.info.model.vocabularySize) ?? invalidTools(request);
        if (invalid !== undefined)
            return this.finish(active, "error", invalid, "invalid_request");
        active.sampling = extraSampling(request, this.loaded.model, this.loaded.TokenBias, this.loaded.context.contextSize,
            () => ({prompt: active.promptTokens, generated: active.generated}), () => this.endOfGenerationTokens());
        // Refused before its prompt is even tokenized: a full queue costs the engine next to nothing.
        if (this.queue.length >= this.maxWaiting && !this.slots.some((slot) => slot.request === undefined))
            return this.finish(active, "error",
                `the engine's waiting queue is full: ${this.queue.length} requests are waiting, at most ${this.maxWaiting} may ` +
                "(maxWaitingRequests); retry shortly", "queue_full");
        const tools = offeredTools(this.loaded.model, request);
        const mustCall = request.toolChoice !== undefined && request.toolChoice !== "auto";
        if (mustCall && tools === undefined)
            return this.finish(active, "error", hasChatTemplate(this.loaded.model)
                ? "toolChoice: no tools are offered" : "toolChoice: this model has no chat template, so it cannot be offered tools", "invalid_request");
        if (tools !== undefined)
            active.toolCalls = new ToolCallExtractor(toolCallSyntaxFor(this.loaded.model), new Set(tools.map((tool) => tool.name)));
        this.prepareReasoning(active, request, request.responseFormat !== undefined || mustCall);
        if (request.responseFormat !== undefined || mustCall)
            // Anything unexpected fails this request only (an unhandled rejection would end the engine process).
            this.admitWithGrammar(active, request).catch((error: unknown) => {
                if (this.requests.has(active.id))
                    this.finish(active, "error", `could not prepare the grammar (response format or tool call): ${errorMessage(error)}`, "engine_error");
            });
        else
            this.enqueue(active, request);
    }

    /**
     * A chat request on a model whose template has a reasoning segment: without reasoning (under a grammar — JSON, a
     * forced call — or when the request turns it off) the answer starts at once, an empty segment closed in the
     * prompt, and nothing is split; otherwise the prompt opens the segment where the template does, and the
     * reasoning is split from the answer unless the request asks for the raw text.
     */
    private prepareReasoning(active: ActiveRequest, request: GenerateRequest, constrained: boolean): void {
        const syntax = request.messages === undefined ? undefined : reasoningSyntaxFor(this.loaded.model);
        if (syntax === undefined)
            return;
        if (constrained || request.allowReasoning === false) {
            active.answerStart = "closed";
            return;
        }
        // Continuing an assistant's message: its answer is under way, not a new reasoning.
        const continues = request.continueFinalMessage === true && request.messages?.at(-1)?.role === "assistant";
        if (syntax.opensOnAnswerStart && !continues)
            active.answerStart = "open";
        if (request.separateReasoning !== false)
            active.reasoning = new ReasoningSplitter(syntax, syntax.opensOnAnswerStart && !continues);
    }

    /**
     * A request for JSON, or one that must call a tool, gets its grammar first (built once per format or tool
     * set, milliseconds; a bad schema is refused here).
     */
    private async admitWithGrammar(active: ActiveRequest, request: GenerateRequest): Promise<void> {
        const field = request.responseFormat === undefined ? "tools" : request.responseFormat.type === "grammar" ? "grammar" : "responseFormat";
        try {
            const state = request.responseFormat !== undefined
                ? await this.grammars.stateFor(request.responseFormat)
                : await this.grammars.toolCallStateFor(toolCallSyntaxFor(this.loaded.model), requiredTools(request),
                    parallelCalls(request));
            active.sampling = {...active.sampling, grammarEvaluationState: state};
        } catch (error) {
            return this.finish(active, "error", `${field}: ${errorMessage(error)}`,
                error instanceof ResponseFormatError ? "invalid_request" : "engine_error");
        }
        if (this.disposed)
            return this.finish(active, "abort", "engine shutting down");
        this.enqueue(active, request);
    }

    /**
     * The vocabulary's end-of-generation tokens (what vLLM's `min_tokens` bans), found once: every token id llama.cpp calls
     * one (EOS, EOT, and the others some models have), or the named ones when the vocabulary's size is unknown.
     */
    private endOfGenerationTokens(): readonly Token[] {
        if (this.endTokens === undefined) {
            const model = this.loaded.model;
            const size = this.loaded.info.model.vocabularySize;
            const candidates = size !== undefined ? Array.from({length: size}, (_, id) => id as Token)
                : [model.tokens.eos, model.tokens.eot].filter((token): token is Token => token !== null);
            this.endTokens = candidates.filter((token) => model.isEogToken(token));
        }
        return this.endTokens;
    }

    /** Tokenizes an accepted request's input and queues it. */
    private enqueue(active: ActiveRequest, request: GenerateRequest): void {
        if ((request.truncatePromptTokens ?? 0) > this.sequenceCapacity)
            return this.finish(active, "error", `truncatePromptTokens (${request.truncatePromptTokens}) is more than this model's ` +
                `context holds per sequence (${this.sequenceCapacity} tokens)`, "invalid_request");
        try {
            active.promptTokens = renderPrompt(this.loaded.model, request, active.answerStart,
                {batchSize: this.loaded.context.batchSize, sequenceCapacity: this.sequenceCapacity});
            if (request.truncatePromptTokens !== undefined) {
                const bos = request.promptTokens === undefined ? this.loaded.model.tokens.bos ?? undefined : undefined;
                active.promptTokens = truncatePrompt(active.promptTokens,
                    request.truncatePromptTokens === -1 ? this.sequenceCapacity : request.truncatePromptTokens, bos);
            }
            active.detokenizer.follow(active.promptTokens);
        } catch (error) {
            return this.finish(active, "error", `could not process input: ${errorMessage(error)}`,
                error instanceof PromptInputError ? "invalid_request" : "engine_error");
        }
        this.emit({kind: "inputProcessed", id: active.id, t: nowMs(), promptTokens: active.promptTokens.length,
            ...(active.returnTokenIds ? {promptTokenIds: [...active.promptTokens]} : {})});
        if (active.stop === "cancel")
            return this.finish(active, "abort");
        if (active.promptTokens.length === 0)
            return this.finish(active, "error", "the prompt is empty after tokenization", "invalid_request");
        if (request.clampMaxTokens === true)
            // At least one token, unless none was asked for (a prompt only scored).
            active.maxTokens = Math.max(Math.min(1, active.maxTokens),
                Math.min(active.maxTokens, this.sequenceCapacity - active.promptTokens.length));
        // Each sequence has its own cells, so a request that fits one never waits for the others' room.
        const needs = active.promptTokens.length + active.maxTokens;
        if (needs > this.sequenceCapacity)
            return this.finish(active, "error",
                `this model's context holds ${this.sequenceCapacity} tokens, but the request needs ${needs} ` +
                `(${active.promptTokens.length} in the prompt, ${active.maxTokens} to generate)`, "context_length_exceeded");

        if (active.pinned !== undefined && active.pinned >= this.slots.length)
            return this.finish(active, "error", `sequence ${active.pinned} does not exist: this engine runs ${this.slots.length} ` +
                `(0 … ${this.slots.length - 1})`, "invalid_request");

        this.queue.push(active);
        this.stats?.counters.add(CounterSlot.promptTokensTotal, active.promptTokens.length);
        this.emit({kind: "queued", id: active.id, t: nowMs()});
        this.schedule();
    }

    private cancel(id: string): void {
        const request = this.requests.get(id);
        if (request === undefined) {
            this.embeddings.cancel(id);
            return; // already finished, or never arrived: nothing to do
        }
        if (this.queue.remove(request))
            return this.finish(request, "abort");
        request.stop = "cancel"; // running (or still processing input): stops at its next token
    }

    /** Starts waiting requests on free sequences; preempts for higher priority. */
    private schedule(): void {
        if (this.loraChanges.holding) {
            // Nothing starts (or is preempted for) until new LoRA scales are in: once no request, slot action or switch to a
            // request's own scales runs (that switch schedules again when it is done).
            if (this.loraChanges.ready && this.runningCount === 0 && this.slotActions.idle && !this.loraSwitching)
                void this.loraChanges.apply().then(() => {
                    this.slotActions.resume(this.slots);
                    this.schedule();
                });
            this.updateQueueCounters();
            return;
        }
        if (this.loraSwitching) {
            this.updateQueueCounters();
            return;
        }
        // In queue order; a request pinned to a busy sequence (GenerateRequest.sequence) lets the ones behind it start.
        for (const next of [...this.queue]) {
            if (this.disposed)
                break;
            // node-llama-cpp applies LoRA adapters to the whole context: a request with other scales than the context's waits
            // until no request runs, and those behind it wait with it (first come, first served), then the scales switch.
            const scales = this.loraScalesOf(next);
            if (scalesKey(scales) !== this.loraChanges.applied) {
                if (this.runningCount === 0 && this.slotActions.idle)
                    this.switchLoraScales(next, scales);
                break;
            }
            const free = this.pickSlot(next);
            if (free !== undefined) {
                this.queue.remove(next);
                this.start(next, free.slot, free.shared, free.restore);
                continue;
            }
            if (next.pinned !== undefined)
                continue;
            this.preemptFor(next);
            break;
        }
        this.updateQueueCounters();
    }

    /** The LoRA scales `request` runs with: its own, else the server's now. */
    private loraScalesOf(request: ActiveRequest): readonly number[] {
        return request.loraScales ?? this.loraChanges.defaultScales;
    }

    /** A request's loraScales that are not one per adapter: why (the host checks the ids, but the server's adapters are the engine's). */
    private invalidLoraScales(request: GenerateRequest): string | undefined {
        const adapters = this.loaded.info.loraAdapters.length;
        if (request.loraScales === undefined || request.loraScales.length === adapters)
            return undefined;
        return `loraScales: expected ${adapters} scale${adapters === 1 ? "" : "s"} (one per LoRA adapter), got ${request.loraScales.length}`;
    }

    /**
     * Switches the context to `scales`, the waiting `request`'s, while no request runs; then schedules again. If
     * node-llama-cpp cannot, the request fails (and the next one tries again).
     */
    private switchLoraScales(request: ActiveRequest, scales: readonly number[]): void {
        this.loraSwitching = true;
        this.loraChanges.switchTo(scales).catch((error: unknown) => {
            if (this.queue.remove(request))
                this.finish(request, "error", `could not set the request's LoRA scales: ${errorMessage(error)}`, "engine_error");
        }).finally(() => {
            this.loraSwitching = false;
            this.slotActions.resume(this.slots);
            this.schedule();
        });
    }

    /** How many leading tokens of `input` `slot` holds that a request with LoRA scales `key` may reuse. */
    private sharedWith(slot: Slot, input: Token[], key: string): number {
        return slot.loraKey === key ? slot.sequence.compareContextTokens(input).firstDifferentIndex : 0;
    }

    /**
     * A free sequence for `request`: with prefix caching, the one whose cached tokens share the longest
     * prefix with its input (ties: the one holding the fewest tokens, so longer caches survive longer), if that is more
     * than {@link minPromptSimilarity} of the input, else an empty one, else the least recently used one;
     * unless the prompt cache holds a state sharing more, which then goes on the least recently used free sequence.
     * A request that reuses no prefix (GenerateRequest.reusePrefix) takes the free sequence holding the fewest tokens.
     */
    private pickSlot(request: ActiveRequest): {slot: Slot, shared: number, restore?: SavedPrompt} | undefined {
        if (request.pinned !== undefined)
            return this.pinnedSlot(request, this.slots[request.pinned]!);
        let best: Slot | undefined;
        let bestShared = -1;
        const input = inputTokens(request);
        const key = scalesKey(this.loraScalesOf(request));
        if (this.prefixCache && !request.reusePrefix) {
            const emptiest = this.slots.reduce<Slot | undefined>((fewest, slot) => this.isFree(slot) &&
                (fewest === undefined || slot.sequence.nextTokenIndex < fewest.sequence.nextTokenIndex) ? slot : fewest, undefined);
            return emptiest === undefined ? undefined : {slot: emptiest, shared: 0};
        }
        for (const slot of this.slots) {
            if (!this.isFree(slot))
                continue;
            if (!this.prefixCache)
                return {slot, shared: 0};
            const shared = this.sharedWith(slot, input, key);
            const fewerTokens = best !== undefined && slot.sequence.nextTokenIndex < best.sequence.nextTokenIndex;
            if (shared > bestShared || (shared === bestShared && fewerTokens)) {
                best = slot;
                bestShared = shared;
            }
        }
        if (best === undefined)
            return undefined;
        if (bestShared <= minPromptSimilarity * input.length) {
            best = this.leastValuableFreeSlot()!;
            bestShared = this.sharedWith(best, input, key);
        }
        const saved = this.promptCache === undefined || scoresPrompt(request) ? undefined
            : this.promptCache.bestFor(input, bestShared, key);
        if (saved === undefined)
            return {slot: best, shared: bestShared};
        const leastRecent = this.slots.reduce<Slot | undefined>((lru, slot) =>
            this.isFree(slot) && (lru === undefined || slot.lastUsed < lru.lastUsed) ? slot : lru, undefined)!;
        return {slot: leastRecent, shared: saved.shared, restore: saved.prompt};
    }

    /** The free sequence whose tokens are least worth keeping: an empty one, else the least recently used one. */
    private leastValuableFreeSlot(): Slot | undefined {
        let chosen: Slot | undefined;
        for (const slot of this.slots) {
            if (!this.isFree(slot))
                continue;
            const empty = slot.sequence.nextTokenIndex === 0;
            const chosenEmpty = chosen?.sequence.nextTokenIndex === 0;
            if (chosen === undefined || (empty && !chosenEmpty) || (empty === chosenEmpty && slot.lastUsed < chosen.lastUsed))
                chosen = slot;
        }
        return chosen;
    }

    /** `slot` for a request pinned to it, once it is free: the prefix it holds is reused as pickSlot's would be. */
    private pinnedSlot(request: ActiveRequest, slot: Slot): {slot: Slot, shared: number} | undefined {
        if (!this.isFree(slot))
            return undefined;
        const reuses = this.prefixCache && request.reusePrefix;
        return {slot, shared: reuses ? this.sharedWith(slot, inputTokens(request), scalesKey(this.loraScalesOf(request))) : 0};
    }

    /** Whether a request may start on `slot`: none runs there, nor a slot action. */
    private isFree(slot: Slot): boolean {
        return slot.request === undefined && !this.slotActions.busy(slot);
    }

    /** Preempts the lowest-priority running request (newest first among equals) if `waiting` outranks it. */
    private preemptFor(waiting: ActiveRequest): void {
        let victim: ActiveRequest | undefined;
        for (const slot of this.slots) {
            const running = slot.request;
            if (running === undefined)
                continue;
            if (running.stop === "preempt")
                return; // one preemption at a time: its sequence is about to be freed
            if (victim === undefined || running.priority < victim.priority ||
                (running.priority === victim.priority && running.arrivalSeq > victim.arrivalSeq))
                victim = running;
        }
        if (victim !== undefined && victim.stop === undefined && victim.priority < waiting.priority)
            victim.stop = "preempt";
    }

    /**
     * `shared`: leading input tokens already in the slot's cache (pickSlot's comparison), or in `restore`, a saved state
     * to restore there first (taken out of the prompt cache now, so no other request picks it).
     */
    private start(request: ActiveRequest, slot: Slot, shared: number, restore?: SavedPrompt): void {
        slot.request = request;
        request.slot = slot;
        request.tailErased = false;
        // At least the last input token is evaluated again: its logits give the first new token. A prompt to score is
        // evaluated from its start: each token's distribution is read on the way. A lone shared token (the BOS of unrelated
        // prompts) is evaluated again too: llama.cpp evaluates a prompt after one held token slower than the same prompt
        // with that token from an empty sequence (`minReusedPrefix`).
        const input = inputTokens(request);
        const reusable = Math.min(shared, input.length - 1);
        // A short rest deep in the cache may go faster with cached tokens before it evaluated again (attentionTilePadding.ts).
        const shape = this.loaded.tilePadding;
        const waste = this.loaded.attentionTileWaste;
        // Its rest goes in its first step, alone when nothing else is stepping (no other sequence's decode takes a token of it).
        const alone = this.decoding === 0 && this.barrier.memberCount === 0;
        const tiled = shape === undefined || waste === undefined ? reusable
            : reusedWithTilePadding(shape, reusable, input.length, alone, waste);
        request.cachedTokens = scoresPrompt(request) || tiled < minReusedPrefix ? 0 : tiled;
        if (restore !== undefined) {
            this.promptCache?.take(restore);
            request.restore = restore;
        }
        if (this.runningCount === 1)
            this.stats?.counters.restartStepClock(Date.now());
        this.updateQueueCounters();
        const t = nowMs();
        // A restore may fail: the cached tokens are known once it is done (`swapPromptState`).
        if (restore === undefined)
            this.emitScheduled(request, t, 0);
        void this.run(request, slot, t);
    }

    /**
     * The next piece of a prompt that goes in pieces of at most `limit`, `rest` to go: where the attention goes in tiles,
     * one leaving a whole tile at the end where that pays (`alone`: no other sequence decodes beside its pieces).
     */
    private pieceOf(rest: number, limit: number, alone: boolean): number {
        const waste = this.loaded.attentionTileWaste;
        return waste === undefined ? limit : pieceLeavingATile(rest, limit, alone, waste);
    }

    /**
     * Puts `size` tokens of `input` from `from` on `request`'s sequence, in this turn's batch, without sampling (with
     * `scores`, scored into them), and reports the prompt's progress; returns the input tokens held after them.
     */
    private async evaluatePromptPiece(
        request: ActiveRequest, slot: Slot, input: Token[], from: number, size: number, scores?: TokenLogprob[]
    ): Promise<number> {
        this.barrier.submittedChunk(size);
        if (scores !== undefined)
            scores.push(...await this.scorePart(slot, input, from, size, request.promptLogprobs ?? 0));
        else
            await slot.sequence.evaluateWithoutGeneratingNewTokens(input.slice(from, from + size));
        this.stepTokens += size;
        // A resumed request's input holds what it generated: its progress is not a prompt's.
        if (request.generated.length === 0)
            this.emit({kind: "prefilled", id: request.id, t: nowMs(), processedTokens: from + size});
        return from + size;
    }

    /** The request is on its sequence (the host counts a preempted one resuming as scheduled once, as vLLM). */
    private emitScheduled(request: ActiveRequest, t: number, restoredTokens: number): void {
        const sequence = request.slot === undefined ? -1 : this.slots.indexOf(request.slot);
        this.emit({kind: "scheduled", id: request.id, t, cachedTokens: request.cachedTokens,
            ...(this.promptCache !== undefined ? {restoredTokens} : {}), ...(sequence >= 0 ? {sequence} : {})});
    }

    /**
     * With the prompt cache, the tokens `slot` holds when they are to be saved before the request replaces them: it keeps
     * under half of them (llama-server's rule) and the cache does not have them all yet. Undefined: nothing to save.
     */
    private tokensToSave(request: ActiveRequest, slot: Slot): Token[] | undefined {
        if (this.promptCache === undefined || slot.sequence.nextTokenIndex === 0)
            return undefined;
        const kept = request.restore !== undefined ? 0 : request.cachedTokens;
        if (kept >= slot.sequence.nextTokenIndex / 2)
            return undefined;
        const held = slot.sequence.contextTokens;
        return this.promptCache.worthSaving(held, slot.loraKey) ? held : undefined;
    }

    /**
     * Saves `held`, what `slot` holds (`tokensToSave`), then restores the request's saved state there; returns once no
     * other request's save or restore is in flight either. Requests admitted together (a wave of clients whose previous
     * requests ended in the same step) so submit their prompts in one turn, as without the prompt cache: one prefill
     * batch. Otherwise the first one's prompt went alone, and its second token waited for each other prompt's own batch.
     * Failures cost only the reuse (the input is evaluated whole), with a warning.
     */
    private async swapPromptState(request: ActiveRequest, slot: Slot, held: Token[] | undefined, scheduledAt: number): Promise<void> {
        this.swapsInFlight++;
        try {
            await this.savedAndRestored(request, slot, held, scheduledAt);
        } finally {
            // Released even when this one failed: the others must not wait for good.
            if (--this.swapsInFlight === 0)
                for (const resolve of this.swapWaiters.splice(0))
                    resolve();
        }
        if (this.swapsInFlight > 0)
            await new Promise<void>((resolve) => this.swapWaiters.push(resolve));
    }

    private async savedAndRestored(request: ActiveRequest, slot: Slot, held: Token[] | undefined, scheduledAt: number): Promise<void> {
        const cache = this.promptCache!;
        const restore = request.restore;
        request.restore = undefined;
        if (held !== undefined)
            await cache.save(slot.sequence, held, slot.loraKey); // its failures are warned about by the cache, and cost only the saving
        if (restore === undefined)
            return;
        let restored = request.cachedTokens;
        try {
            await cache.restore(restore, slot.sequence);
        } catch (err) {
            this.sink({type: "log", level: "warn", message: `prompt cache: could not restore a saved state: ${errorMessage(err)}`});
            request.cachedTokens = restored = 0;
            await slot.sequence.clearHistory();
        }
        this.emitScheduled(request, scheduledAt, restored);
    }

    private async run(request: ActiveRequest, slot: Slot, scheduledAt: number): Promise<void> {
        if (request.debugBlockMs > 0)
            busyBlock(request.debugBlockMs);
        const input = inputTokens(request);
        let reason: FinishReason | undefined;
        let error: string | undefined;
        let errorCode: RequestErrorCode | undefined;
        let prefillPending = true;
        let member: StepMember | undefined;
        let decoding = false;
        let next = request.cachedTokens;
        /** The rest of a prompt that went in pieces goes in at the step release its loop left at (not at the next one). */
        let released = false;
        try {
            const order = this.slots.indexOf(slot);
            // While nobody decodes yet, a prompt goes in whole (up to one batch of it when others' prompts
            // are in flight), and the request is a step member from now on: the first step anyone decodes
            // waits for its first token too. Requests that arrive together, or a few ms apart (a wave of
            // closed-loop clients, a burst of HTTP requests), so decode in lockstep from their first token
            // on, instead of the first one decoding alone while the others' prompts ride its steps; its
            // second token waits for their prompts instead. Decided before any await: the prompt cache's
            // save and restore and the erase below may wait for the batch in flight.
            const scoring = scoresPrompt(request);
            // A prompt to score, or only to evaluate (nothing to generate), goes in pieces up to its last token.
            const inPieces = scoring || request.maxTokens === 0;
            const whole = !inPieces && this.decoding === 0 &&
                (this.barrier.memberCount === 0 || input.length - next <= this.loaded.context.batchSize);
            if (whole)
                member = this.barrier.join(order);
            const held = this.tokensToSave(request, slot);
            if (held !== undefined || request.restore !== undefined) {
                await this.swapPromptState(request, slot, held, scheduledAt);
                next = request.cachedTokens; // 0 if the restore failed
            }
            const reused = next;
            // The sequence keeps the shared prefix; everything after it (an earlier request's tail) goes.
            if (slot.sequence.nextTokenIndex > reused)
                await slot.sequence.eraseContextTokenRanges([{start: reused, end: slot.sequence.nextTokenIndex}]);
            request.tailErased = true;
            // What it holds from now on is computed with the context's scales, the request's (`schedule`).
            slot.loraKey = scalesKey(this.loraScalesOf(request));
            if (!whole) {
                // Chunked prefill: while other requests decode, a long input goes in pieces, one per step,
                // each in the same batch as their decodes, so they keep generating instead of waiting for
                // the whole prompt; the rest goes with their next decodes, and it joins the steps then. The
                // step's budget goes to the long inputs first come, first served (prefillBudget.ts). A prompt
                // that fits one step's budget goes whole in the next step, whatever long ones are prefilling:
                // a short request is not held behind a long prompt.
                const pieces = inPieces || input.length - next > this.prefillBudget.tokensPerStep;
                this.prefilling++;
                if (pieces)
                    this.prefillBudget.set(request, input.length - next);
                const scores: TokenLogprob[] = [];
                try {
                    // Whether or not others decode; a scored piece's tokens are evaluated with their next-token distributions read.
                    while (pieces && request.stop === undefined && (inPieces ? next < input.length - 1 : this.barrier.memberCount > 0)) {
                        await this.barrier.nextStep(order);
                        if (request.stop !== undefined)
                            break;
                        // This step's share, once the requests ahead have taken theirs (0: none left, wait for the next step).
                        const share = inPieces && this.barrier.memberCount === 0
                            ? this.loaded.context.batchSize : this.prefillBudget.shareOf(request);
                        // The whole rest fits: it goes in this step, with the first new token.
                        if (!inPieces && share >= input.length - next) {
                            released = true;
                            break;
                        }
                        // The last token always stays for `evaluate`, whose logits give the first new token.
                        const size = Math.min(this.pieceOf(input.length - next, share, this.decoding === 0), input.length - next - 1);
                        if (size <= 0)
                            continue;
                        next = await this.evaluatePromptPiece(request, slot, input, next, size, scoring ? scores : undefined);
                        this.prefillBudget.set(request, input.length - next);
                    }
                } finally {
                    this.prefilling--;
                }
                if (scoring && request.stop === undefined) {
                    request.promptScored = true;
                    this.emit({kind: "promptLogprobs", id: request.id, t: nowMs(),
                        first: this.loaded.model.detokenize(input.slice(0, 1), true), logprobs: scores});
                }
                // Nothing to generate: the last prompt token's logits would be the first new token's (a later request
                // with this prefix evaluates that token again anyway).
                if (request.maxTokens === 0 && request.stop === undefined)
                    reason = "length";
                if (reason === undefined) {
                    if (!released)
                        await this.barrier.nextStep(order);
                    if (request.stop === undefined)
                        member = this.barrier.join(order);
                }
            }
            // A whole prompt longer than a batch: all but its last batch first, a batch at a time (node-llama-cpp would split
            // it so anyway), so its progress shows as llama-server reports each batch. It is a step member all along: the
            // prompts arriving meanwhile go in whole beside its batches, and the first step that decodes waits for it.
            while (whole && request.stop === undefined && input.length - next > this.loaded.context.batchSize)
                next = await this.evaluatePromptPiece(request, slot, input, next,
                    this.pieceOf(input.length - next, this.loaded.context.batchSize, this.decoding === 0));
            if (request.stop === undefined && member !== undefined) {
                this.barrier.submitted(member, input.length - next);
                // With no alternatives asked for, the token's own probability is all a log-probability needs: node-llama-cpp's
                // `confidence`, the same number its `probabilities` would hold for the token, without handing the whole
                // distribution over and mapping it (at temperature 0 every vocabulary entry: 114 vs 21 ms per token on a
                // 150k-token vocabulary, 7–10 ms without either).
                const wanted = request.logprobs === undefined ? {} : request.logprobs === 0 ? {confidence: true} : {probabilities: true};
                let tokenReported = false;
                const stepMember = member;
                const tokens = generateTokens(slot.sequence, next === 0 ? input : input.slice(next), wanted, {
                    ...request.sampling,
                    temperature: request.temperature === 0 && request.sampling.xtc !== undefined
                        ? xtcGreedyTemperature : request.temperature,
                    ...(request.topP !== undefined ? {topP: request.topP} : {}),
                    seed: samplerSeed(request.seed + request.generated.length)
                }, (token) => {
                    tokenReported = true;
                    return this.decodesAhead(request, stepMember, token);
                });
                for await (const output of tokens) {
                    const t = nowMs();
                    const {token, probabilities, confidence} = output;
                    // A token the loop could not offer to decode ahead (its next sample reads this work): the others' wait.
                    if (!tokenReported)
                        void this.barrier.tokenIn(member, "waits");
                    tokenReported = false;
                    if (prefillPending) {
                        prefillPending = false;
                        this.prefillBudget.leave(request);
                        decoding = true;
                        this.decoding++;
                        this.stepTokens += input.length - next;
                    }
                    if (request.stop === "cancel")
                        break;
                    const own = confidence !== undefined ? new Map([[token, confidence]]) : undefined;
                    const ending = this.recordToken(request, token, t, probabilities ?? own);
                    if (request.lineLimits?.stopped === true) {
                        reason = "length";
                        break;
                    }
                    if (request.stopStrings.hasStopped) {
                        reason = "stop";
                        break;
                    }
                    if (request.generated.length >= request.maxTokens) {
                        reason = "length";
                        break;
                    }
                    if (ending !== undefined) {
                        reason = "stop";
                        if (ending === "stopToken")
                            request.stoppedBy = token;
                        break;
                    }
                    if (request.stop === "preempt")
                        break;
                    const stepDone = this.barrier.arrive(member);
                    this.rearmHeldFlush();
                    await stepDone;
                }
                reason ??= request.stop === undefined ? "stop" : undefined;
            }
        } catch (err) {
            reason = "error";
            error = `generation failed: ${errorMessage(err)}`;
            errorCode = "engine_error";
        } finally {
            this.prefillBudget.leave(request);
            this.ending++;
            if (decoding)
                this.decoding--;
            if (member !== undefined)
                this.barrier.leave(member);
        }
        // With prefix caching the sequence keeps its tokens for the next request, unless generation
        // failed and its KV cache cannot be trusted.
        if (!this.prefixCache || reason === "error") {
            try {
                await slot.sequence.clearHistory();
            } catch (err) {
                this.sink({type: "log", level: "warn", message: `could not clear a sequence: ${errorMessage(err)}`});
            }
        }
        slot.request = undefined;
        slot.lastUsed = ++this.slotUses;
        request.slot = undefined;
        // A slot action that waited for the sequence runs before another request takes it, as llama-server's deferred ones.
        this.slotActions.takeFreed(slot);

        if (reason !== undefined)
            this.finish(request, reason, error, errorCode);
        else if (request.stop === "cancel" || this.disposed)
            this.finish(request, "abort");
        else {
            request.stop = undefined;
            request.preempted = true;
            this.emit({kind: "preempted", id: request.id, t: nowMs()});
            this.queue.push(request);
        }
        // Requests that end in the same step free their sequences one after another, each as it handles its last token
        // (and, with the prefix cache off, once its sequence is cleared). Waiting requests start once all have: at the end
        // of the step while others' samples of its batch are in flight, else with the last of them. Their prompts then
        // go in whole in one batch, not the first one's alone and each later one's in a step of its own.
        this.ending--;
        if (this.barrier.samplesInFlight)
            this.scheduleAtStepEnd = true;
        else if (this.ending === 0)
            this.startWaiting();
    }

    /**
     * Starts waiting requests once the requests ending in a step have all left it. When none runs any more, the step's
     * last outputs go first: nothing decodes that their sending could wait beside, and a flush after the newcomers joined
     * the step would hold them for the newcomers' prompts (`holdFlush`).
     */
    private startWaiting(): void {
        this.scheduleAtStepEnd = false;
        if (this.barrier.memberCount === 0 && this.pendingEvents.length > 0)
            this.flush();
        this.schedule();
    }

    /**
     * Evaluates `size` input tokens from `from` and reads the model's distribution after each: the log-probability
     * of the token that follows it in the input (so `from + 1` … `from + size`), with `top` alternatives.
     */
    private async scorePart(slot: Slot, input: readonly Token[], from: number, size: number, top: number): Promise<TokenLogprob[]> {
        const items = input.slice(from, from + size).map((token): [Token, {generateNext: {probabilities: true}}] =>
            [token, {generateNext: {probabilities: true}}]);
        const results = await slot.sequence.controlledEvaluate(items);
        return results.map((result, i) =>
            scoredPromptTokenLogprob(this.loaded.model, input[from + i + 1]!, result?.next.probabilities, top, this.pieceContext()));
    }

    /**
     * Whether a request's sampled token may be decoded before the engine handles it (leanDecode.ts, `DecodeAhead`): when
     * no prompt waits to share its next step and the token cannot end it. The engine's per-token work then runs beside
     * the next decode instead of ahead of it. Alone, at once; with others, once every running request has its token of
     * the step (`StepBarrier.tokenIn`), all in one batch. A stop string, a line limit or a cancel found in that work
     * leaves one more token decoded in the sequence, which its prefix cache then holds.
     */
    private decodesAhead(request: ActiveRequest, member: StepMember, token: Token): boolean | Promise<number> {
        const generated = request.generated.length + 1;
        const goesOn = request.stop === undefined && generated < request.maxTokens &&
            this.tokenEnding(request, token, generated) === undefined;
        if (this.barrier.memberCount > 1)
            return this.barrier.tokenIn(member, goesOn ? "continues" : "ends");
        return goesOn && this.prefilling === 0 && this.queue.length === 0;
    }

    /** Whether `token`, the request's `generated`-th, ends its answer: see `recordToken`. */
    private tokenEnding(request: ActiveRequest, token: Token, generated: number): "end" | "stopToken" | undefined {
        return !request.ignoreEos && this.loaded.model.isEogToken(token) ? "end"
            : request.stopTokenIds?.has(token) === true && generated >= request.minTokens ? "stopToken" : undefined;
    }

    /**
     * `probabilities`: the sampler's, when the request asked for log-probabilities. Returns whether the token ends the
     * answer: "end" (an end-of-generation token, unless ignored), "stopToken" (one of its stop ids, once minTokens are out).
     */
    private recordToken(request: ActiveRequest, token: Token, t: number, probabilities: ReadonlyMap<Token, number> | undefined):
    "end" | "stopToken" | undefined {
        // Requests stepping together: this one's token of the last step has not gone out yet, as the step's decode, queued
        // ahead, came back first (a busy event loop). That step's outputs go now, so one outputs message stays one step.
        // Alone, its tokens may share a message (fewer messages while the event loop lags: at concurrency 1 flushing here
        // cost throughput, 0.873 vs 1.013 of llama-server's over IPC, 3 interleaved runs of 2 repeats, 2026-12-07).
        if (request.pendingTimes.length > 0 && this.barrier.memberCount > 1)
            this.flush(true);
        request.generated.push(token);
        const ending = this.tokenEnding(request, token, request.generated.length);
        // As vLLM, the token that ends the answer is not part of its text unless asked for.
        const piece = ending !== undefined && !request.outputsStopToken ? "" : request.detokenizer.push(token);
        const text = request.stopStrings.push(piece, request.generated.length >= request.minTokens);
        const limits = request.lineLimits;
        this.addOutput(request, limits === undefined ? text : limits.push(text), true);
        limits?.timeUp(text, t);
        request.pendingTimes.push(t);
        if (request.returnTokenIds)
            request.pendingIds.push(token);
        if (request.logprobs !== undefined)
            request.pendingLogprobs.push(tokenLogprob(this.loaded.model, token, probabilities, request.logprobs, this.pieceContext()));
        this.pendingTokenRequests.add(request);
        this.stepTokens++;
        this.stats?.counters.add(CounterSlot.generationTokensTotal, 1);
        this.scheduleFlush();
        return ending;
    }

    /**
     * Stable output text (`ofToken`: one generated token's) into the pending reasoning and answer; the answer minus
     * what belongs to tool calls.
     */
    private addOutput(request: ActiveRequest, text: string, ofToken: boolean): void {
        let answer = text;
        const reasoning = request.reasoning;
        if (reasoning !== undefined) {
            const wasReasoning = reasoning.inReasoning;
            const split = reasoning.push(text);
            // The markers' tokens count with the reasoning.
            if (ofToken && (wasReasoning || reasoning.inReasoning))
                request.reasoningTokens++;
            request.pendingReasoning += split.reasoning;
            answer = split.answer;
        }
        this.addAnswer(request, answer);
    }

    /** Answer text, minus what belongs to tool calls. */
    private addAnswer(request: ActiveRequest, text: string): void {
        request.pendingText += request.toolCalls === undefined ? text : request.toolCalls.push(text);
    }

    private finish(request: ActiveRequest, reason: FinishReason, error?: string, errorCode?: RequestErrorCode): void {
        const stopped = request.stopStrings;
        const held = stopped.push(request.detokenizer.flush()) + stopped.flush();
        this.addOutput(request, request.lineLimits?.push(held) ?? held, false);
        const rest = request.reasoning?.finish();
        if (rest !== undefined) {
            request.pendingReasoning += rest.reasoning;
            this.addAnswer(request, rest.answer);
        }
        const toolCalls = request.toolCalls?.finish();
        if (toolCalls !== undefined)
            request.pendingText += toolCalls.text;
        if (request.pendingTimes.length > 0 || request.pendingText !== "" || request.pendingReasoning !== "")
            this.takeTokens(request);
        this.requests.delete(request.id);
        const event: RequestEvent = {
            kind: "finished", id: request.id, t: nowMs(), reason,
            promptTokens: request.promptTokens.length, generatedTokens: request.generated.length
        };
        if (error !== undefined) {
            event.error = error;
            event.errorCode = errorCode ?? "engine_error";
        }
        if (toolCalls !== undefined && toolCalls.calls.length > 0 && (reason === "stop" || reason === "length"))
            event.toolCalls = toolCalls.calls;
        if (request.reasoning !== undefined)
            event.reasoningTokens = request.reasoningTokens;
        const stopString = request.stopStrings.matched;
        if (stopString !== undefined && stopString !== jsonGrammarStop && reason === "stop")
            event.stopString = stopString;
        if (request.stoppedBy !== undefined && reason === "stop")
            event.stopTokenId = request.stoppedBy;
        this.emit(event);
    }

    /** Moves a request's pending tokens into the pending events, keeping event order per request. */
    private takeTokens(request: ActiveRequest): void {
        this.pendingTokenRequests.delete(request);
        this.pendingEvents.push({kind: "tokens", id: request.id, text: request.pendingText,
            ...(request.pendingReasoning !== "" ? {reasoning: request.pendingReasoning} : {}), times: request.pendingTimes,
            ...(request.logprobs !== undefined ? {logprobs: request.pendingLogprobs} : {}),
            ...(request.returnTokenIds ? {ids: request.pendingIds} : {})});
        request.pendingLogprobs = [];
        request.pendingIds = [];
        request.pendingText = "";
        request.pendingReasoning = "";
        request.pendingTimes = [];
    }

    private emit(event: RequestEvent): void {
        const pending = this.requests.get(event.id);
        if (pending !== undefined && this.pendingTokenRequests.has(pending) && event.kind !== "tokens")
            this.takeTokens(pending);
        this.pendingEvents.push(event);
        this.scheduleFlush();
    }

    /**
     * Outputs go out one event-loop turn after the step's tokens: node-llama-cpp dispatches the next
     * batch on the first turn (setImmediate), so serializing and sending happen while the native
     * decode runs instead of delaying it.
     */
    private scheduleFlush(): void {
        if (this.flushScheduled)
            return;
        this.flushScheduled = true;
        setImmediate(() => setImmediate(() => this.flush()));
    }

    /** Every running request has its token of this step (or left): the outputs that waited for it go out. */
    private onStepEnd(): void {
        // The decodes this release queues are exactly the two running requests' next tokens: one batch each, where that is faster.
        if (this.pairSplit !== undefined)
            this.pairSplit.active = this.barrier.memberCount === 2 && this.prefilling === 0 && this.queue.length === 0;
        if (this.heldFlush !== undefined) {
            clearTimeout(this.heldFlush.timer);
            this.heldFlush = undefined;
            this.scheduleFlush();
        }
        if (this.scheduleAtStepEnd && this.ending === 0)
            this.startWaiting();
    }

    /**
     * One step's outputs: every request's new tokens and lifecycle events, plus the step stats. Not
     * part of a step: while some running requests still sample this step's token, the flush waits for
     * the step, so one outputs message is one step (the iteration-tokens histogram counts per message;
     * split, a 4-request step was read as several 1- or 2-token iterations, and the host handled ~3
     * messages per step). The wait is bounded (`holdFlush`).
     */
    private flush(force = false): void {
        this.flushScheduled = false;
        if (!force && this.barrier.stepInProgress) {
            this.holdFlush();
            return;
        }
        clearTimeout(this.heldFlush?.timer);
        this.heldFlush = undefined;
        for (const request of this.pendingTokenRequests)
            this.takeTokens(request);
        if (this.pendingEvents.length === 0)
            return;
        const t = nowMs();
        let kvUsed = 0;
        for (const slot of this.slots)
            if (slot.request !== undefined) {
                const held = slot.sequence.nextTokenIndex;
                kvUsed += slot.request.tailErased ? held : Math.min(held, slot.request.cachedTokens);
            }
        const step: StepStats = {
            t, running: this.runningCount + this.embeddings.runningCount, waiting: this.queue.length + this.embeddings.waitingCount,
            stepTokens: this.stepTokens,
            kvUsedTokens: kvUsed, kvCapacityTokens: this.kvCapacity
        };
        if (this.stepTokens > 0)
            this.stats?.onStep(step);
        this.stepTokens = 0;
        const events = this.pendingEvents;
        this.pendingEvents = [];
        this.sink({type: "outputs", events, step});
    }

    /**
     * Holds a flush until the step ends, or a bound: long while members of the same batch have not taken
     * this step's token (their samples are in flight; under load, a 5 ms bound alone split steps), short
     * once only members whose prompts went in later are left (a prompt evaluating in a later batch must not
     * delay tokens already sampled). When the bound passes, the flush waits one more turn:
     * a blocked event loop runs due timers before the I/O callbacks that became ready meanwhile.
     */
    private holdFlush(): void {
        const forSamples = this.barrier.samplesInFlight;
        // Held already: only a long hold becomes a short one.
        if (this.heldFlush !== undefined && (forSamples || !this.heldFlush.forSamples))
            return;
        clearTimeout(this.heldFlush?.timer);
        const timer = setTimeout(() => setImmediate(() => {
            if (this.heldFlush?.timer !== timer)
                return;
            this.heldFlush = undefined;
            this.flush(true);
        }), forSamples ? maxFlushHoldForSamplesMs : maxFlushHoldForPromptMs);
        this.heldFlush = {timer, forSamples};
    }

    /** A member took its token: a flush held for samples in flight may now wait only for prompts. */
    private rearmHeldFlush(): void {
        if (this.heldFlush?.forSamples === true && this.barrier.stepInProgress)
            this.holdFlush();
    }

    private updateQueueCounters(): void {
        const counters = this.stats?.counters;
        if (counters === undefined)
            return;
        counters.set(CounterSlot.running, this.runningCount);
        counters.set(CounterSlot.waiting, this.queue.length);
    }
}

/** Whether the request's prompt is still to be scored (GenerateRequest.promptLogprobs). */
function scoresPrompt(request: ActiveRequest): boolean {
    return request.promptLogprobs !== undefined && !request.promptScored;
}

/** What a request evaluates: its prompt, plus what it had generated when it resumes after a preemption. */
function inputTokens(request: ActiveRequest): Token[] {
    return request.generated.length === 0 ? request.promptTokens : request.promptTokens.concat(request.generated);
}

/**
 * The temperature that stands for 0 under XTC: node-llama-cpp's greedy sampler runs XTC on the whole vocabulary, while
 * llama.cpp's server, at temperature 0, runs it after top-k, top-p and min-p as at any other; a temperature this low
 * takes that chain and still picks the most likely token left.
 */
const xtcGreedyTemperature = 1e-6;

/** Why a request's parameters cannot be served, or undefined when they can. */
function invalidParameter(request: GenerateRequest, allowDebugRequests: boolean): string | undefined {
    if (request.debugBlockMs !== undefined && !allowDebugRequests)
        return "debugBlockMs is a test-only field and this engine does not allow debug requests";
    if (request.maxTokens < 0)
        return `maxTokens must be ≥ 0, got ${request.maxTokens}`;
    if (request.temperature !== undefined && request.temperature < 0)
        return `temperature must be ≥ 0, got ${request.temperature}`;
    if (request.topP !== undefined && !(request.topP > 0 && request.topP <= 1))
        return `topP must be in (0, 1], got ${request.topP}`;
    const logprobs = request.logprobs;
    if (logprobs !== undefined && !(Number.isInteger(logprobs) && logprobs >= 0 && logprobs <= maxTopLogprobs))
        return `logprobs must be an integer from 0 to ${maxTopLogprobs}, got ${request.logprobs}`;
    if (request.minIndent !== undefined && !(Number.isInteger(request.minIndent) && request.minIndent >= 0))
        return `minIndent must be an integer ≥ 0, got ${request.minIndent}`;
    if (request.maxGenerationMs !== undefined && !(request.maxGenerationMs >= 0))
        return `maxGenerationMs must be ≥ 0, got ${request.maxGenerationMs}`;
    const truncate = request.truncatePromptTokens;
    if (truncate !== undefined && !(Number.isInteger(truncate) && (truncate >= 1 || truncate === -1)))
        return `truncatePromptTokens must be an integer ≥ 1, or −1; got ${truncate}`;
    if (truncate !== undefined && request.suffix !== undefined)
        return "truncatePromptTokens cannot be used with suffix (fill in the middle): it would cut the FIM markers";
    const promptLogprobs = request.promptLogprobs;
    if (promptLogprobs !== undefined && !(Number.isInteger(promptLogprobs) && promptLogprobs >= 0 && promptLogprobs <= maxTopLogprobs))
        return `promptLogprobs must be an integer from 0 to ${maxTopLogprobs}, got ${promptLogprobs}`;
    return undefined;
}

/** Test-only: occupy the main thread, as a stuck native call or a long synchronous step would. */
function busyBlock(ms: number): void {
    const until = Date.now() + ms;
    while (Date.now() < until) {
        // spin
    }
}

/** The prompt cache for `limitMiB` (0: none); one that cannot be created is reported and left out. */
async function createPromptCache(limitMiB: number, sink: EngineSink): Promise<PromptCache | undefined> {
    if (limitMiB <= 0)
        return undefined;
    try {
        return await PromptCache.create(limitMiB, (message) => sink({type: "log", level: "warn", message}));
    } catch (err) {
        sink({type: "log", level: "warn", message: `prompt cache off: ${errorMessage(err)}`});
        return undefined;
    }
}
