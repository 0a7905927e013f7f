/**
 * A request's decode loop on its sequence, leaner than node-llama-cpp's `evaluateWithMetadata`.
 *
 * Per token, node-llama-cpp's generator takes the sequence's evaluation lock, aborts a token predictor, builds a
 * sampler lock and runs its own async generator layers around the one thing that matters: queue the token's decode
 * in the context's shared batch and sample from its logits. On a small model that wrapping is a tenth of a token's
 * time: a loop of its `evaluate` gave 891–933 tok/s where this one gives 986–1017, one sequence, demo `small` q4_0
 * (2026-12-06, interleaved). This loop does that one thing through the same internal calls, so everything else
 * stays node-llama-cpp's: the batch dispatch, the sequence's token bookkeeping (prefix reuse and erasing read it),
 * context shifting, the sampler configuration (resolved per token from the same options, as its own loop does).
 *
 * It relies on internals of node-llama-cpp 3.21.1 (pinned exactly): `leanInternals` checks they are there, and
 * `generateTokens` uses node-llama-cpp's own loop whenever they are not, for a token predictor, or when the whole
 * distribution is asked for. test/engine/leanDecode.test.ts holds it to node-llama-cpp's tokens.
 *
 * The engine is a sequence's only user while it generates on it (a slot has one request), so this loop takes no
 * evaluation lock between tokens: nothing else erases, clears or saves that sequence meanwhile.
 */
import type {LlamaContextSequence, SequenceEvaluateOptions, Token} from "./llamaTypes.js";
import {sampleAheadOf, type NativeSample} from "./sampleAhead.js";
import {soloDecodeOf} from "./soloDecode.js";

/** A generated token, with the sampler's probability of it when asked for. */
export type GeneratedToken = {token: Token, probabilities?: Map<Token, number>, confidence?: number};

type SamplerConfig = {dryRepeatPenaltySequenceBreakers?: false | string[]} & Record<string, unknown>;
type NativeSampler = {applyConfig(config: SamplerConfig): void, dispose(): void};

/** node-llama-cpp 3.21.1's LlamaContextSequence internals this loop drives (not in its typings). */
type SequenceInternals = {
    _decodeTokens(
        tokens: Token[], logits: boolean[], evaluationPriority: number, tokenMeter: unknown, contextShift: unknown,
        logitDataMapper: (batchLogitIndex: number) => Promise<NativeSample>, afterBatchAction: unknown
    ): Promise<unknown[]>,
    _resolveSamplerConfig(options: SamplerOptions): SamplerConfig,
    _tokenMeter: unknown,
    _contextShift: unknown,
    _takeIntervalCheckpointIfNeededAfterBatch: unknown,
    _tokenPredictor: unknown,
    _sequenceId: number,
    _context: {
        dispatchPendingBatch(): void,
        _ctx: {sampleToken(batchLogitIndex: number, sampler: NativeSampler, probabilities?: boolean, confidence?: boolean):
            Promise<NativeSample>}
    },
    model: {_model: unknown, _llama: {_bindings: {AddonSampler: new (model: unknown) => NativeSampler}}}
};

type SamplerOptions = Pick<SequenceEvaluateOptions, "temperature" | "minP" | "topK" | "topP" | "seed" | "xtc" |
    "grammarEvaluationState" | "repeatPenalty" | "dryRepeatPenalty" | "tokenBias">;

/** node-llama-cpp's priority for an evaluation that names none. */
const defaultEvaluationPriority = 5;

/** The sequence's internals, when this node-llama-cpp has them all. */
export function leanInternals(sequence: LlamaContextSequence): SequenceInternals | undefined {
    const internals = sequence as unknown as Partial<SequenceInternals>;
    const ctx = internals._context?._ctx;
    const bindings = internals.model?._llama?._bindings;
    return typeof internals._decodeTokens === "function" && typeof internals._resolveSamplerConfig === "function" &&
        typeof internals._context?.dispatchPendingBatch === "function" &&
        typeof ctx?.sampleToken === "function" && typeof bindings?.AddonSampler === "function" &&
        internals._contextShift !== undefined && internals._tokenMeter !== undefined && typeof internals._sequenceId === "number"
        ? internals as SequenceInternals : undefined;
}

/**
 * Evaluates `tokens` on `sequence` and yields each token sampled after them, fed back in turn, until the caller
 * stops: `sequence.evaluateWithMetadata(tokens, metadata, {...options, yieldEogToken: true})`, leaner when it can be.
 */
export function generateTokens(
    sequence: LlamaContextSequence, tokens: Token[], metadata: {probabilities?: boolean, confidence?: boolean}, options: SamplerOptions,
    decodeAhead: DecodeAhead = () => false
): AsyncGenerator<GeneratedToken, void, undefined> {
    const internals = leanInternals(sequence);
    if (internals === undefined || internals._tokenPredictor != null || metadata.probabilities === true)
        return sequence.evaluateWithMetadata(tokens, metadata, {...options, yieldEogToken: true}) as
            AsyncGenerator<GeneratedToken, void, undefined>;
    return leanLoop(internals, tokens, metadata.confidence === true, options, decodeAhead);
}

/**
 * Asked with each sampled token before it is yielded: true queues that token's decode at once, before the caller
 * handles the token, so the caller's per-token work runs beside the decode instead of ahead of it. The caller
 * answers true only where the token will be fed back (it cannot end the output). A boolean: no other sequence's decode
 * is meant to share the batch, so the decode goes at once (straight on the native context where it can be). A promise:
 * other sequences' decodes are to share it; it resolves, once theirs are in, with how many sequences decode ahead now,
 * this one included (0: none, the caller feeds the token back once it has handled it): their loops hand their tokens over
 * in the same turn, and they go in one batch (SoloDecode.gather). If the caller stops after all, the sequence holds
 * that one more token, decoded. Never asked where a sampling option is a function (a penalty window, token bans or a
 * grammar state read per token): those read the caller's state, which has not seen the token yet.
 */
export type DecodeAhead = (token: Token) => boolean | Promise<number>;

async function* leanLoop(internals: SequenceInternals, tokens: Token[], confidence: boolean, options: SamplerOptions,
                         decodeAhead: DecodeAhead): AsyncGenerator<GeneratedToken, void, undefined> {
    const {temperature, minP, topK, topP, seed, xtc, grammarEvaluationState, repeatPenalty, dryRepeatPenalty, tokenBias} = options;
    // Only the sampling fields: node-llama-cpp resolves them into its native sampler's configuration.
    const samplerOptions: SamplerOptions = {
        temperature, minP, topK, topP, seed, xtc, grammarEvaluationState, repeatPenalty, dryRepeatPenalty, tokenBias
    };
    // A configuration that reads the caller's state (the output so far) per token is resolved when the next sample is
    // queued: never before the caller has had the token.
    const readsCaller = typeof repeatPenalty?.punishTokens === "function" || typeof tokenBias === "function" ||
        typeof grammarEvaluationState === "function";
    const sampler = new Sampler(new internals.model._llama._bindings.AddonSampler(internals.model._model));
    const ctx = internals._context._ctx;
    const ahead = sampleAheadOf(ctx);
    const solo = soloDecodeOf(ctx);
    const sequence = internals as unknown as LlamaContextSequence;
    let sampling: Promise<NativeSample> | undefined;
    const sample = (batchLogitIndex: number): Promise<NativeSample> => {
        // Per token, as node-llama-cpp's loop: the penalties' window, the bans and a grammar's state move with the output.
        sampler.apply(internals._resolveSamplerConfig(samplerOptions));
        sampling = confidence ? ctx.sampleToken(batchLogitIndex, sampler.native, false, true)
            : ctx.sampleToken(batchLogitIndex, sampler.native);
        return sampling;
    };
    // One token's decode and its sample, resolved with the sampled token's result; `queued`, where it is sampled ahead,
    // resolves once the decode and its sample are queued on the native side (or will not be).
    const decode = (input: Token[], dispatchNow = false): {result: Promise<NativeSample | undefined>, queued?: Promise<void>} => {
        const logits: boolean[] = [];
        logits[input.length - 1] = true;
        // Sampled right behind the decode where it can be (sampleAhead.ts), else once the decode is back.
        const expected = ahead?.expect(internals._sequenceId, sample);
        const decoded = internals._decodeTokens(input, logits, defaultEvaluationPriority, internals._tokenMeter,
            internals._contextShift, expected !== undefined ? (index) => expected.take(index) : sample,
            internals._takeIntervalCheckpointIfNeededAfterBatch);
        // Queued by now (unless the sequence first shifts its context): its batch goes now instead of on the next turn.
        if (dispatchNow)
            internals._context.dispatchPendingBatch();
        const result = decoded.then((results) => results[input.length - 1] as NativeSample | undefined).finally(() => {
            if (expected !== undefined)
                ahead?.forget(internals._sequenceId, expected);
        });
        return expected !== undefined ? {result, queued: expected.settled} : {result};
    };
    let decoding: Promise<NativeSample | undefined> | undefined = decode(tokens).result;
    try {
        for (;;) {
            const result: NativeSample | undefined = await decoding;
            decoding = undefined;
            const token: Token | -1 | undefined = Array.isArray(result) ? result[0] : result;
            if (token === undefined || token === -1)
                throw new Error("Failed to sample next token");
            const ahead: boolean | Promise<number> = readsCaller ? false : decodeAhead(token);
            if (ahead === true) {
                // Alone: straight on the native context where nothing else is in the way (soloDecode.ts), else through
                // node-llama-cpp, dispatched now.
                const soloDecoding: Promise<NativeSample> | undefined = solo?.tryDecode(sequence, token, sample);
                const next: ReturnType<typeof decode> | undefined = soloDecoding === undefined ? decode([token], true) : undefined;
                decoding = soloDecoding ?? next!.result;
                // The caller's work on this token then runs while the native side decodes the next (a solo decode is queued).
                await next?.queued;
            } else if (ahead !== false) {
                // With the others stepping with it: in one batch with theirs, straight on the native context where it can be,
                // else queued for node-llama-cpp's next dispatch, which batches them.
                const together: number = await ahead;
                const viaNodeLlamaCpp = (): Promise<NativeSample | undefined> => decode([token]).result;
                if (together > 0)
                    decoding = solo !== undefined ? solo.gather(together, {sequence, token, sample}, viaNodeLlamaCpp) : viaNodeLlamaCpp();
            }
            // A decode queued ahead: its failure is thrown when the loop goes on, or dropped when the caller stops first.
            decoding?.catch(() => undefined);
            const sampledConfidence = Array.isArray(result) ? result[2] : undefined;
            yield sampledConfidence !== undefined ? {token, confidence: sampledConfidence} : {token};
            decoding ??= decode([token]).result;
        }
    } finally {
        // Never under a decode or a native sample still running (a decode queued ahead, or an error while one was in flight).
        await decoding?.catch(() => undefined);
        await sampling?.catch(() => undefined);
        sampler.dispose();
    }
}

/** A native sampler, given node-llama-cpp's configurations as its LlamaSampler gives them. */
class Sampler {
    private drySequenceBreakers: string[] | undefined;

    constructor(readonly native: NativeSampler) {}

    apply(config: SamplerConfig): void {
        // The same breakers as last time: `false` keeps the native sampler from rebuilding them (LlamaSampler's rule).
        const breakers = config.dryRepeatPenaltySequenceBreakers;
        if (config.dryRepeatPenaltyStrength != null && breakers !== undefined && breakers !== false) {
            if (breakers === this.drySequenceBreakers)
                config.dryRepeatPenaltySequenceBreakers = false;
            else
                this.drySequenceBreakers = breakers;
        }
        this.native.applyConfig(config);
    }

    dispose(): void {
        this.native.dispose();
    }
}
