/**
 * Two requests decoding together: one batch of two tokens, or two batches of one, whichever this build's kernels run faster.
 *
 * The engine keeps running requests in lockstep so their tokens share one batch (stepBarrier.ts), which on most builds and
 * models costs less than a batch per token. node-llama-cpp's prebuilt CPU kernels break that for f16 weights at two
 * tokens: on the 2-vCPU development VM (AMD EPYC, its `zen4` variant, 1 thread) a decode batch of two took 2.4–2.9× one of
 * one (demo `small` f16: 2.1–2.8 vs 6.0–6.6 ms; `medium` f16: 9.6–9.9 vs 23–24 ms), where three tokens cost about their
 * single steps (0.9–1.2×), four to eight 0.6–1.0×, and q4_0 weights batch two at 1.7–1.9× (2026-12-07). So the engine
 * measures both while it loads (`measureDecodePairCost`), and where a pair costs more than `splitRatio` singles, a step
 * of exactly two one-token decodes goes to llama.cpp as two batches (`DecodePairSplit`): node-llama-cpp's batch loop runs
 * them back to back. Above 2, not 2, because the second batch starts only after the first one's result has been to the
 * main thread and back.
 */
import type {BatchItem, LlamaContext, LlamaContextSequence, LlamaModel, PrioritizedBatchItem, Token} from "./llamaTypes.js";

/** Median milliseconds of a one-token decode on one sequence (`singleMs`) and of one token on each of two, one batch (`pairMs`). */
export type DecodePairCost = {singleMs: number, pairMs: number};

/** A pair is split where it costs more than this many single-token decodes. */
export const splitRatio = 2.2;
/** A model whose single-token decode takes longer is not measured (the measurement would add seconds to its load). */
const maxMeasuredSingleMs = 50;
const repeats = 3;

/** Whether a step of two one-token decodes should go as two batches. */
export function splitsDecodePairs(cost: DecodePairCost | undefined): boolean {
    return cost !== undefined && cost.pairMs > splitRatio * cost.singleMs;
}

/**
 * Times single-token decodes on one sequence against one-token decodes on two sequences at once (interleaved, medians of
 * `repeats`), on two sequences of `context` freed afterwards. Undefined where the context has fewer than two sequences
 * or a single-token decode is slow (a large model, whose decode is bound by memory, not by these kernels' batch shapes).
 */
export async function measureDecodePairCost(model: LlamaModel, context: LlamaContext): Promise<DecodePairCost | undefined> {
    if (context.totalSequences < 2)
        return undefined;
    const sequences = [context.getSequence(), context.getSequence()] as const;
    try {
        const token = model.tokens.bos ?? model.tokens.eos ?? model.tokenize("a")[0];
        if (token === undefined)
            return undefined;
        const decode = async (on: readonly LlamaContextSequence[]): Promise<number> => {
            const started = performance.now();
            await Promise.all(on.map((sequence) => sequence.evaluateWithoutGeneratingNewTokens([token as Token])));
            return performance.now() - started;
        };
        // Each sequence's first decode goes unmeasured (a new sequence's first batch sets up its cells). The first one also
        // tells a slow model, which then costs its load one token's decode and no more.
        if (await decode(sequences.slice(0, 1)) > maxMeasuredSingleMs)
            return undefined;
        await decode(sequences.slice(1));
        const singles: number[] = [];
        const pairs: number[] = [];
        for (let i = 0; i < repeats; i++) {
            singles.push(await decode(sequences.slice(0, 1)));
            pairs.push(await decode(sequences));
        }
        return {singleMs: median(singles), pairMs: median(pairs)};
    } finally {
        for (const sequence of sequences)
            await sequence.dispose();
    }
}

function median(values: number[]): number {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)]!;
}

/**
 * node-llama-cpp's batch prioritization while pairs are split: two one-token items go one per batch (the first now, the
 * second in the batch loop's next round); anything else goes in queue order, each item whole while the batch has room.
 * The engine turns it on only for steps of its two running requests with no prompt beside them, where everything
 * fits one batch, so node-llama-cpp's own strategy ("maximumParallelism") would have put every item in whole too.
 */
export function splitDecodePair({items, size}: {items: readonly BatchItem[], size: number}): PrioritizedBatchItem[] {
    if (items.length === 2 && items.every((item) => item.tokens.length === 1))
        return [{item: items[0]!, processAmount: 1}];
    const prioritized: PrioritizedBatchItem[] = [];
    let left = size;
    for (const item of items) {
        if (left <= 0)
            break;
        const processAmount = Math.min(item.tokens.length, left);
        prioritized.push({item, processAmount});
        left -= processAmount;
    }
    return prioritized;
}

type BatchingOptions = {itemPrioritizationStrategy?: unknown};

/**
 * Switches a context's batch prioritization between node-llama-cpp's own and `splitDecodePair`. It sets node-llama-cpp
 * 3.21.1's `_batchingOptions` (pinned exactly), which the context reads at every dispatch.
 */
export class DecodePairSplit {
    private readonly original: unknown;
    private on = false;

    private constructor(private readonly options: BatchingOptions) {
        this.original = options.itemPrioritizationStrategy;
    }

    /** The switch for `context`, or undefined where this node-llama-cpp has no `_batchingOptions` to set. */
    static of(context: LlamaContext): DecodePairSplit | undefined {
        const options = (context as unknown as {_batchingOptions?: BatchingOptions})._batchingOptions;
        return options !== undefined && typeof options === "object" && "itemPrioritizationStrategy" in options
            ? new DecodePairSplit(options) : undefined;
    }

    get active(): boolean {
        return this.on;
    }

    set active(on: boolean) {
        if (on === this.on)
            return;
        this.on = on;
        this.options.itemPrioritizationStrategy = on ? splitDecodePair : this.original;
    }
}
