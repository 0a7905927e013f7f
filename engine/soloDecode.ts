/**
 * Tokens decoded ahead, straight on node-llama-cpp's native context: a lone request's next token, or the next tokens of
 * the requests stepping together, in one batch (`gather`).
 *
 * node-llama-cpp queues every decode, then a dispatch builds the batch under the context's lock: it orders the queued
 * decodes, fits them to a batch, takes a dispose guard and the threads, decodes, maps the logits through promises, and
 * resolves each sequence's decode, whose loop then books the tokens. With one request decoding that is all one token,
 * and its JavaScript runs between the sample of a token and the decode of the next, where the native thread waits: on
 * the 2-vCPU VM 56–270 µs of a ~1.1 ms token at concurrency 1 (demo `small` q4_0, 2026-12-07, timed at the native
 * calls), against llama-server's ~1.0 ms whole token.
 *
 * When a lone request decodes ahead (leanDecode.ts: nobody else's decode is meant to share the batch), this makes the
 * same native calls node-llama-cpp's dispatch makes for a one-token batch, under the same lock, and books the token on
 * the sequence as its loop does. Requests stepping together hand their next tokens over once all are sampled
 * (StepBarrier.tokenIn), and they go the same way, one token per sequence in one batch: at concurrency 4 on the demo
 * `small` q4_0 (2-vCPU VM, one thread) the decode thread then waited 0.11–0.18 ms between a step's last sample and the
 * next batch, where it waited 0.19–0.35 ms behind node-llama-cpp's dispatch and the engine's work on the tokens
 * (2026-12-07, in-process, 6 interleaved runs). It stands aside whenever anything else is in the way: a decode queued
 * or a dispatch pending, the context's lock held (an erase, a state save, a dispatch finishing), a context shift due, a
 * model that keeps checkpoints, a disposal. It is installed only where samples run behind their decode (sampleAhead.ts: one
 * libuv thread), never on Vulkan (node-llama-cpp serializes its decodes under a lock of its own there), and only when
 * the lock module it loads is the very one node-llama-cpp's locks live in (`sharesContextLock`).
 *
 * It relies on internals of node-llama-cpp 3.21.1 (pinned exactly); test/engine/leanDecode.test.ts holds its tokens
 * and the sequence's bookkeeping to node-llama-cpp's own loop.
 */
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import type {LlamaContext, LlamaContextSequence, Token} from "./llamaTypes.js";
import type {NativeBatchContext, NativeSample} from "./sampleAhead.js";

/** lifecycle-utils' lock functions, as node-llama-cpp 3.21.1 takes its context lock (`withLock([context, "context"], …)`). */
type LockModule = {
    withLock: <T>(scope: readonly unknown[], callback: () => Promise<T>) => Promise<T>,
    isLockActive: (scope: readonly unknown[]) => boolean
};

/** node-llama-cpp 3.21.1's LlamaContext internals read here. */
type ContextInternals = {
    _ctx: NativeBatchContext,
    _queuedDecodes: unknown[],
    _batchDispatchPending: boolean,
    _disposed: boolean,
    contextSize: number,
    dispatchPendingBatch(): void,
    _backendContextDisposeGuard: {createPreventDisposalHandle(): {dispose(): void}},
    _llama: {gpu: string | false}
};

/** node-llama-cpp 3.21.1's LlamaContextSequence internals read and booked here. */
type SequenceInternals = {
    _sequenceId: number,
    _nextTokenIndex: number,
    _contextTokens: Token[],
    _disposed: boolean,
    _loadedTokenPredictions: unknown[],
    needsCheckpoints: boolean,
    _tokenMeter: {useTokens(tokens: number, type: "input" | "output"): void}
};

const installed = new WeakMap<object, SoloDecode>();

/**
 * The lifecycle-utils node-llama-cpp imports, resolved from node-llama-cpp's own folder: its locks are that module's
 * state, so only that copy's `withLock` excludes node-llama-cpp's.
 */
async function importNodeLlamaCppLocks(): Promise<LockModule | undefined> {
    try {
        const fromHere = createRequire(__filename);
        const lockModulePath = createRequire(fromHere.resolve("node-llama-cpp")).resolve("lifecycle-utils");
        const locks = await import(pathToFileURL(lockModulePath).href) as Partial<LockModule>;
        return typeof locks.withLock === "function" && typeof locks.isLockActive === "function" ? locks as LockModule : undefined;
    } catch {
        return undefined;
    }
}

/**
 * Whether `locks` holds the same locks as node-llama-cpp. A dispatch with nothing queued runs at once when nobody holds
 * node-llama-cpp's lock on the context; under our lock on it, it stays pending only if its lock is ours. Call while
 * nothing else uses the context.
 */
export async function sharesContextLock(locks: LockModule, context: ContextInternals): Promise<boolean> {
    // A dispatch holds the lock for a few microtasks after its work: let any such tail end first.
    const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    await settle();
    if (context._batchDispatchPending || context._queuedDecodes.length > 0 || locks.isLockActive([context, "context"]))
        return false;
    context.dispatchPendingBatch();
    if (context._batchDispatchPending)
        return false; // node-llama-cpp's lock is held by something else: no telling
    await settle();
    return await locks.withLock([context, "context"], () => {
        context.dispatchPendingBatch();
        return Promise.resolve(context._batchDispatchPending);
    });
}

function contextInternals(context: LlamaContext): ContextInternals | undefined {
    const internals = context as unknown as Partial<ContextInternals>;
    return Array.isArray(internals._queuedDecodes) && typeof internals._batchDispatchPending === "boolean" &&
        typeof internals.dispatchPendingBatch === "function" && typeof internals.contextSize === "number" &&
        typeof internals._backendContextDisposeGuard?.createPreventDisposalHandle === "function" &&
        typeof internals._ctx?.initBatch === "function" && typeof internals._ctx.addToBatch === "function" &&
        typeof internals._ctx.decodeBatch === "function" && internals._llama !== undefined
        ? internals as ContextInternals : undefined;
}

/**
 * Installs the solo decode on `context` when its samples are queued behind their decodes (`sampleAheadInstalled`), its
 * backend is not Vulkan, and node-llama-cpp's lock module can be shared. Call before anything decodes on it.
 */
export async function installSoloDecode(context: LlamaContext, sampleAheadInstalled: boolean): Promise<boolean> {
    const internals = contextInternals(context);
    if (!sampleAheadInstalled || internals === undefined || internals._llama.gpu === "vulkan")
        return false;
    const locks = await importNodeLlamaCppLocks();
    if (locks === undefined || !await sharesContextLock(locks, internals))
        return false;
    installed.set(internals._ctx, new SoloDecode(locks, internals));
    return true;
}

/** The solo decode installed on this native context, if any. */
export function soloDecodeOf(native: object): SoloDecode | undefined {
    return installed.get(native);
}

/** One sequence's next token in a batch decoded here, with the sample of its logits (`sample`, given the batch logit index). */
export type AheadToken = {
    sequence: LlamaContextSequence,
    token: Token,
    sample: (batchLogitIndex: number) => Promise<NativeSample>
};

/** The tokens of one step gathered so far (`SoloDecode.gather`). */
type Gathering = {
    size: number,
    entries: Array<AheadToken & {
        viaNodeLlamaCpp: () => Promise<NativeSample | undefined>,
        resolve: (sample: Promise<NativeSample | undefined>) => void
    }>
};

export class SoloDecode {
    /** Tokens decoded here since installed. */
    decodes = 0;
    private gathering: Gathering | undefined;

    constructor(private readonly locks: LockModule, private readonly context: ContextInternals) {}

    /** Runs `work` under node-llama-cpp's lock on the context: once no decode is in flight (nor one ahead of a request that ended). */
    exclusive<T>(work: () => Promise<T>): Promise<T> {
        return this.locks.withLock([this.context, "context"], work);
    }

    /**
     * Queues the decode of `token` on `sequence` and, right behind it, the sample of its logits (`sample`, given the
     * batch logit index); resolves with the sample once both are done and the token is booked on the sequence. Returns
     * undefined, having done nothing, where anything else is in the way: then node-llama-cpp's own path decodes it.
     */
    tryDecode(sequence: LlamaContextSequence, token: Token, sample: (batchLogitIndex: number) => Promise<NativeSample>):
    Promise<NativeSample> | undefined {
        const context = this.context;
        const seq = sequence as unknown as SequenceInternals;
        if (!this.contextFree() || !this.takesToken(seq))
            return undefined;
        this.decodes++;
        // Free, so the lock is taken and everything up to the first await runs now: the decode and its sample are queued
        // on libuv's one thread before this returns. Not through `tryDecodeAll`: at concurrency 1 its arrays and extra
        // promise hops, in the engine's interpreted JavaScript, looked to cost throughput (0.939 vs 0.974 of llama-server's
        // over IPC, 4 interleaved runs of 3 repeats, 2026-12-07; inside the noise, but that way).
        return this.locks.withLock([context, "context"], async () => {
            const disposalGuard = context._backendContextDisposeGuard.createPreventDisposalHandle();
            try {
                const first = seq._nextTokenIndex;
                context._ctx.initBatch(1);
                const [batchLogitIndex] = context._ctx.addToBatch(seq._sequenceId, first, Uint32Array.of(token), Uint32Array.of(0));
                if (batchLogitIndex === undefined)
                    throw new Error("solo decode: the batch gave no logits for the token");
                const decoding = context._ctx.decodeBatch();
                const sampling = sampleBehind(sample, batchLogitIndex);
                try {
                    await decoding;
                } catch (error) {
                    // The lock is held until nothing of this batch is left running natively.
                    await sampling.catch(() => undefined);
                    throw error;
                }
                bookDecodedToken(seq, first, token);
                return await sampling;
            } finally {
                disposalGuard.dispose();
            }
        });
    }

    /** Nothing else uses the context: no decode queued, no dispatch pending, its lock free, not disposed. */
    private contextFree(): boolean {
        const context = this.context;
        return !context._disposed && !context._batchDispatchPending && context._queuedDecodes.length === 0 &&
            !this.locks.isLockActive([context, "context"]);
    }

    /** The sequence takes a token straight on the native context: no checkpoints, predictions or context shift in the way. */
    private takesToken(seq: SequenceInternals): boolean {
        return !seq._disposed && seq.needsCheckpoints === false && seq._loadedTokenPredictions.length === 0 &&
            typeof seq._tokenMeter?.useTokens === "function" && this.context.contextSize - 1 - seq._nextTokenIndex > 0;
    }

    /**
     * One token of each of `size` sequences stepping together (StepBarrier.tokenIn), all decoded ahead in one batch: each
     * loop hands its token here in the same turn, and once all `size` are in they go as one batch straight on the native
     * context, in the order they came (the sequences' order, so llama.cpp can reuse the step's graph), with their samples
     * right behind. Where anything else is in the way, each goes through node-llama-cpp (`viaNodeLlamaCpp`), whose next
     * dispatch batches them. Resolves with the token's sample once it is decoded and booked, as `tryDecode`.
     */
    gather(size: number, entry: AheadToken, viaNodeLlamaCpp: () => Promise<NativeSample | undefined>): Promise<NativeSample | undefined> {
        if (this.gathering !== undefined && this.gathering.size !== size)
            this.decodeGathered();
        const gathering = this.gathering ??= {size, entries: []};
        const result = new Promise<NativeSample | undefined>((resolve) => gathering.entries.push({...entry, viaNodeLlamaCpp, resolve}));
        if (gathering.entries.length >= size)
            this.decodeGathered();
        else if (gathering.entries.length === 1)
            setImmediate(() => {
                // Not all came in their turn (a loop stopped on the way): the ones here go without the others.
                if (this.gathering === gathering)
                    this.decodeGathered();
            });
        return result;
    }

    private decodeGathered(): void {
        const entries = this.gathering?.entries ?? [];
        this.gathering = undefined;
        const decoded = this.tryDecodeAll(entries);
        entries.forEach((entry, i) => entry.resolve(decoded?.[i] ?? entry.viaNodeLlamaCpp()));
    }

    /**
     * `tryDecode` for one token on each of several sequences, in one batch: one promise per entry, or undefined, having
     * done nothing, where anything else is in the way (see `tryDecode`) or two entries share a sequence.
     */
    private tryDecodeAll(entries: readonly AheadToken[]): Array<Promise<NativeSample>> | undefined {
        const context = this.context;
        const sequences = entries.map((entry) => entry.sequence as unknown as SequenceInternals);
        if (entries.length === 0 || !this.contextFree() || new Set(sequences).size < sequences.length ||
            !sequences.every((seq) => this.takesToken(seq)))
            return undefined;
        this.decodes += entries.length;
        // Free, so the lock is taken and everything up to the first await runs now: the decode and its samples are queued
        // on libuv's one thread before this returns.
        const batch = this.locks.withLock([context, "context"], async () => {
            const disposalGuard = context._backendContextDisposeGuard.createPreventDisposalHandle();
            try {
                const firsts = sequences.map((seq) => seq._nextTokenIndex);
                context._ctx.initBatch(entries.length);
                const batchLogitIndexes = entries.map(({token}, i) => {
                    const [batchLogitIndex] = context._ctx.addToBatch(sequences[i]!._sequenceId, firsts[i]!, Uint32Array.of(token),
                        Uint32Array.of(0));
                    if (batchLogitIndex === undefined)
                        throw new Error("solo decode: the batch gave no logits for a token");
                    return batchLogitIndex;
                });
                const decoding = context._ctx.decodeBatch();
                const samplings = entries.map(({sample}, i) => sampleBehind(sample, batchLogitIndexes[i]!));
                try {
                    await decoding;
                } catch (error) {
                    // The lock is held until nothing of this batch is left running natively.
                    await Promise.allSettled(samplings);
                    throw error;
                }
                entries.forEach(({token}, i) => bookDecodedToken(sequences[i]!, firsts[i]!, token));
                // The lock and the disposal guard are held until nothing of this batch is left running natively.
                await Promise.allSettled(samplings);
                return samplings;
            } finally {
                disposalGuard.dispose();
            }
        });
        batch.catch(() => undefined);
        return entries.map((_, i) => batch.then((samplings) => samplings[i]!));
    }
}

/**
 * The sample of a batch logit, queued right behind its decode. Its own error (a sampler configuration it could not take) is
 * thrown once the decode is back.
 */
function sampleBehind(sample: (batchLogitIndex: number) => Promise<NativeSample>, batchLogitIndex: number): Promise<NativeSample> {
    let sampling: Promise<NativeSample>;
    try {
        sampling = sample(batchLogitIndex);
    } catch (error) {
        sampling = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    sampling.catch(() => undefined);
    return sampling;
}

/** What node-llama-cpp books for a decoded token with logits: an output token, the next index, the token. */
function bookDecodedToken(seq: SequenceInternals, first: number, token: Token): void {
    seq._tokenMeter.useTokens(1, "output");
    seq._nextTokenIndex = first + 1;
    seq._contextTokens = seq._contextTokens.concat(token);
}
