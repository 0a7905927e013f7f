/**
 * Queues a lean decode loop's sample on libuv's thread right behind the decode that makes its logits.
 *
 * node-llama-cpp runs every decode and every sample as its own native task on libuv's pool, and samples
 * only once the decode's promise has resolved on the main thread: per step the thread hands the decode's
 * result back, waits for the main thread to wake, run the batch's JavaScript and queue the samples, and then
 * runs them. With one pool thread (the engine process's `UV_THREADPOOL_SIZE=1`, `engineThreadpoolSize`) tasks run
 * one at a time, in the order they are queued, so a sample queued right after its decode runs after it, on
 * the decode's logits, without that round trip: the thread goes from the decode straight on to the samples.
 * With more pool threads a sample could run beside its decode, so this is only ever installed on one.
 *
 * It hooks node-llama-cpp 3.21.1's native context (pinned exactly): `initBatch` starts a batch, `addToBatch`
 * returns the batch logit indexes of a sequence's tokens, `decodeBatch` queues the decode. A loop expects a
 * sample for its sequence before queueing its tokens; when its last token (the one with logits) joins a batch,
 * the sample is queued as soon as that batch's decode is. node-llama-cpp then asks the loop for that index's
 * sample after the decode, and gets the one already under way. Nothing changes for a decode that fails: its
 * sample's result is never asked for, and the request ends with the decode's error.
 */
import type {LlamaContext, Token} from "./llamaTypes.js";

/** What node-llama-cpp's native sample resolves to: a token (−1: none), with probabilities and confidence when asked. */
export type NativeSample = Token | -1 | [token: Token | -1, probabilities: unknown, confidence: number | undefined];

/** The calls of node-llama-cpp 3.21.1's native context (AddonContext) this hooks. */
export type NativeBatchContext = {
    initBatch(size: number): void,
    addToBatch(sequenceId: number, firstTokenSequenceIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array,
    decodeBatch(): Promise<void>
};

/** A loop's expected sample: queued with `sample` once its logits' decode is queued. */
export class ExpectedSample {
    private queued: {batchLogitIndex: number, sampling: Promise<NativeSample>} | undefined;
    private cancelled = false;
    private settle!: () => void;
    /** Resolves once the sample is queued behind its decode, or is no longer going to be (taken or cancelled first). */
    readonly settled = new Promise<void>((resolve) => {
        this.settle = resolve;
    });

    constructor(private readonly sample: (batchLogitIndex: number) => Promise<NativeSample>) {}

    /** Queues the sample now (the decode of its logits has just been queued ahead of it); false if no longer wanted. */
    queue(batchLogitIndex: number): boolean {
        if (this.cancelled || this.queued !== undefined)
            return false;
        let sampling: Promise<NativeSample>;
        try {
            sampling = this.sample(batchLogitIndex);
        } catch (error) {
            // Its own request's error, from `take`: it must not fail the batch's decode, which runs for every request in it.
            sampling = Promise.reject(error instanceof Error ? error : new Error(String(error)));
        }
        // Never an unhandled rejection where nobody takes it (the decode failed first); `take` still gets the rejection.
        sampling.catch(() => undefined);
        this.queued = {batchLogitIndex, sampling};
        this.settle();
        return true;
    }

    /** The sample of this index: the one already queued, or one queued now. */
    take(batchLogitIndex: number): Promise<NativeSample> {
        const queued = this.queued;
        this.queued = undefined;
        this.cancelled = true;
        this.settle();
        if (queued !== undefined && queued.batchLogitIndex === batchLogitIndex)
            return queued.sampling;
        if (queued !== undefined) // a rejection, not a throw: node-llama-cpp would fail the whole batch's requests with it
            return Promise.reject(new Error(`sample ahead: queued for batch logit ${queued.batchLogitIndex}, asked for ${batchLogitIndex}`));
        return this.sample(batchLogitIndex);
    }

    /** The loop stopped waiting (its decode failed): never queue it. */
    cancel(): void {
        this.cancelled = true;
        this.settle();
    }
}

const installed = new WeakMap<object, SampleAhead>();

/**
 * Installs sample-ahead on `context` when libuv's pool has one thread (UV_THREADPOOL_SIZE, read by libuv when
 * the pool starts, which is this process's first native task) and node-llama-cpp has the calls it hooks.
 */
export function installSampleAhead(context: LlamaContext, threadpoolSize = process.env.UV_THREADPOOL_SIZE): boolean {
    const native = (context as unknown as {_ctx?: Partial<NativeBatchContext>})._ctx;
    if (threadpoolSize?.trim() !== "1" || native === undefined || typeof native.initBatch !== "function" ||
        typeof native.addToBatch !== "function" || typeof native.decodeBatch !== "function")
        return false;
    if (!installed.has(native))
        installed.set(native, SampleAhead.install(native as NativeBatchContext));
    return true;
}

/** The sample-ahead installed on this native context, if any. */
export function sampleAheadOf(native: object): SampleAhead | undefined {
    return installed.get(native);
}

export class SampleAhead {
    /** Expected samples by sequence, until the sequence's token with logits joins a batch. */
    private readonly expected = new Map<number, ExpectedSample>();
    /** Samples whose logits are in the batch being built, to queue once its decode is. */
    private batch: Array<{expected: ExpectedSample, batchLogitIndex: number}> = [];
    /** Samples queued right behind their decode, since installed. */
    queuedAhead = 0;

    private constructor() {}

    /** Hooks `native`; call only where libuv's pool has exactly one thread. */
    static install(native: NativeBatchContext): SampleAhead {
        const ahead = new SampleAhead();
        const initBatch = native.initBatch.bind(native);
        const addToBatch = native.addToBatch.bind(native);
        const decodeBatch = native.decodeBatch.bind(native);
        // The addon's methods are read-only on its prototype: the hooks shadow them on this instance.
        const hook = <K extends keyof NativeBatchContext>(name: K, value: NativeBatchContext[K]): void => {
            Object.defineProperty(native, name, {value, configurable: true, writable: false, enumerable: false});
        };
        hook("initBatch", (size) => {
            ahead.batch = [];
            initBatch(size);
        });
        hook("addToBatch", (sequenceId, firstTokenSequenceIndex, tokens, logitIndexes) => {
            const batchLogitIndexes = addToBatch(sequenceId, firstTokenSequenceIndex, tokens, logitIndexes);
            const expected = ahead.expected.get(sequenceId);
            // A lean loop asks for the logits of its input's last token only: one index, in the batch that holds it.
            if (expected !== undefined && batchLogitIndexes.length === 1) {
                ahead.expected.delete(sequenceId);
                ahead.batch.push({expected, batchLogitIndex: batchLogitIndexes[0]!});
            }
            return batchLogitIndexes;
        });
        hook("decodeBatch", () => {
            const decoding = decodeBatch();
            const batch = ahead.batch;
            ahead.batch = [];
            for (const {expected, batchLogitIndex} of batch)
                if (expected.queue(batchLogitIndex))
                    ahead.queuedAhead++;
            return decoding;
        });
        return ahead;
    }

    /** `sequenceId`'s next tokens end with one whose logits `sample` samples. */
    expect(sequenceId: number, sample: (batchLogitIndex: number) => Promise<NativeSample>): ExpectedSample {
        const expected = new ExpectedSample(sample);
        this.expected.get(sequenceId)?.cancel();
        this.expected.set(sequenceId, expected);
        return expected;
    }

    /** Drops `expected` if it is still waiting for its batch. */
    forget(sequenceId: number, expected: ExpectedSample): void {
        expected.cancel();
        if (this.expected.get(sequenceId) === expected)
            this.expected.delete(sequenceId);
    }
}
