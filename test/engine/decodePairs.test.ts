/**
 * engine/decodePairs.ts: the split rule and node-llama-cpp's batches with it on, on the real stories260K model. Two lean
 * decode loops running together go one token per batch while the split is on, in two-token batches while it is off, and
 * give the tokens they give alone either way.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {DecodePairSplit, splitDecodePair, splitRatio, splitsDecodePairs} from "../../engine/decodePairs.js";
import {generateTokens} from "../../engine/leanDecode.js";
import type {BatchItem, LlamaContextSequence, Token} from "../../engine/llamaTypes.js";
import {loadModel, type LoadedModel} from "../../engine/modelLoader.js";
import {recordBatchSizes} from "../helpers/batchSizes.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const item = (tokens: number): BatchItem =>
    ({tokens: Array.from({length: tokens}, (_, i) => i as Token), logits: [], evaluationPriority: 5});

describe("decode pairs: the rule", () => {
    test("a pair is split only where it costs more than splitRatio single decodes", () => {
        assert.equal(splitsDecodePairs(undefined), false);
        assert.equal(splitsDecodePairs({singleMs: 2, pairMs: 2 * splitRatio + 0.1}), true);
        assert.equal(splitsDecodePairs({singleMs: 2, pairMs: 2 * splitRatio}), false);
        assert.equal(splitsDecodePairs({singleMs: 1, pairMs: 1.8}), false);
    });

    test("two one-token items: the first alone; anything else in queue order, whole while the batch has room", () => {
        const pair = [item(1), item(1)];
        assert.deepEqual(splitDecodePair({items: pair, size: 512}), [{item: pair[0], processAmount: 1}]);
        const one = [item(1)];
        assert.deepEqual(splitDecodePair({items: one, size: 512}), [{item: one[0], processAmount: 1}]);
        const withPrompt = [item(1), item(40)];
        assert.deepEqual(splitDecodePair({items: withPrompt, size: 512}), withPrompt.map((i) => ({item: i, processAmount: i.tokens.length})));
        const three = [item(1), item(1), item(1)];
        assert.equal(splitDecodePair({items: three, size: 512}).length, 3);
        const over = [item(300), item(300), item(1)];
        assert.deepEqual(splitDecodePair({items: over, size: 512}).map((p) => p.processAmount), [300, 212]);
    });
});

const stories = findStoriesModel();
const suite = "decode pairs (stories260K)";

describe(suite, {skip: skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    let loaded: LoadedModel;
    let sequences: LlamaContextSequence[];
    let prompts: Token[][];
    /** Token counts of the batches node-llama-cpp handed to llama.cpp since the last read. */
    let batches: number[] = [];

    before(async () => {
        loaded = await loadModel({modelPath: stories.path!, threads: 1, parallel: 2, contextSize: 512, gpu: "off"}, () => undefined);
        sequences = [loaded.context.getSequence(), loaded.context.getSequence()];
        prompts = [loaded.model.tokenize("Once upon a time, there was a little girl named Lily. She", true),
            loaded.model.tokenize("The dog ran to the park and", true)];
        batches = recordBatchSizes(loaded.context);
    });
    after(async () => {
        await loaded.context.dispose();
        await loaded.model.dispose();
        await loaded.llama.dispose();
    });

    test("measured while loading", () => {
        const cost = loaded.decodePairCost;
        assert.ok(cost !== undefined && cost.singleMs > 0 && cost.pairMs > 0, `loadModel measured ${JSON.stringify(cost)}`);
    });

    /** Lockstep steps of one token on each sequence (queued in one turn, as the engine's barrier releases them). */
    const steps = async (split: boolean): Promise<{batches: number[], continuations: Token[][]}> => {
        const switched = DecodePairSplit.of(loaded.context);
        assert.ok(switched !== undefined, "node-llama-cpp's batching options are gone");
        for (const sequence of sequences)
            await sequence.clearHistory();
        await Promise.all(sequences.map((sequence, i) => sequence.evaluateWithoutGeneratingNewTokens(prompts[i]!)));
        batches.length = 0;
        switched.active = split;
        try {
            for (let step = 0; step < 8; step++)
                await Promise.all(sequences.map((sequence, i) => sequence.evaluateWithoutGeneratingNewTokens([prompts[1 - i]![step]!])));
        } finally {
            switched.active = false;
        }
        const stepBatches = [...batches];
        // What each sequence then generates, greedy, one at a time: the same KV caches give the same tokens.
        const continuations: Token[][] = [];
        for (const sequence of sequences) {
            const tokens: Token[] = [];
            for await (const token of sequence.evaluate([prompts[0]![1]!], {temperature: 0, yieldEogToken: true})) {
                tokens.push(token);
                if (tokens.length >= 8)
                    break;
            }
            continuations.push(tokens);
        }
        return {batches: stepBatches, continuations};
    };

    test("two requests' decodes queued together: one token per batch with the split on, one batch of two with it off", async () => {
        const off = await steps(false);
        const on = await steps(true);
        assert.deepEqual(off.batches, Array(8).fill(2));
        assert.deepEqual(on.batches, Array(16).fill(1));
        assert.deepEqual(on.continuations, off.continuations, "split or not, the sequences must hold the same");
        assert.notDeepEqual(on.continuations[0], on.continuations[1], "the two sequences must differ for this to tell");
    });

    test("two lean decode loops with the split on get the tokens they get alone", async () => {
        const run = async (i: number): Promise<Token[]> => {
            const out: Token[] = [];
            for await (const output of generateTokens(sequences[i]!, prompts[i]!, {}, {temperature: 0})) {
                out.push(output.token);
                if (out.length >= 16)
                    break;
            }
            return out;
        };
        const alone: Token[][] = [];
        for (const i of [0, 1]) {
            await sequences[i]!.clearHistory();
            alone.push(await run(i));
        }
        for (const sequence of sequences)
            await sequence.clearHistory();
        const switched = DecodePairSplit.of(loaded.context)!;
        switched.active = true;
        try {
            assert.deepEqual(await Promise.all([run(0), run(1)]), alone);
        } finally {
            switched.active = false;
        }
    });
});
