/**
 * Padding a short rest of a prompt deep in a cached prefix to an attention tile (engine/attentionTilePadding.ts): the cost
 * model's choices, the shape it reads from real GGUF files, and the engine on real node-llama-cpp, where a padded request
 * reuses fewer tokens, evaluates exactly the padded rest, and generates what an engine without padding does.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {
    pieceLeavingATile, promptCostShape, reusedWithTilePadding, tileFillingTokens, tiledAttentionQueries, tileWaste, type PromptCostShape
} from "../../engine/attentionTilePadding.js";
import type {GgufFileInfo} from "../../engine/llamaTypes.js";
import {importNodeLlamaCpp} from "../../engine/llamaTypes.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";
import {formatPrefixCache} from "../../common/format.js";
import {defaultPromptCacheMiB} from "../../protocol/engineOptions.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";
import {ensureDemoModel} from "../../engine/model/demoModel.js";

/** The demo `small` model's shape (12 layers, 6 heads of 64, 19.5 M layer weights). */
const small = (weights: PromptCostShape["weights"]): PromptCostShape => ({attentionWidth: 12 * 6 * 128, tokenWeights: 19_464_192 + 9216, weights,
    queryHeads: 6});

/** A file's info as promptCostShape reads it: architecture metadata and tensors. */
function fileInfo(metadata: object, tensors: {name: string, dimensions: number[], ggmlType: number}[]): GgufFileInfo {
    return {architectureMetadata: metadata, fullTensorInfo: tensors} as unknown as GgufFileInfo;
}

describe("the tile padding's cost model", () => {
    test("a short rest deep in the cache is padded to fill a tile; a shallow one, or one of a tile or more, is not", () => {
        const shape = small("q4_0");
        assert.equal(tileFillingTokens(true), tiledAttentionQueries, "alone in its batch: a tile");
        assert.equal(tileFillingTokens(false), tiledAttentionQueries + 1, "beside decodes, which take one token into their micro-batch");
        for (const alone of [true, false]) {
            const tile = tileFillingTokens(alone);
            // Measured on the demo `small` q4_0 (1 thread, 2-vCPU VM): 60 tokens after 2048 took 195 ms, padded 120 ms.
            assert.equal(reusedWithTilePadding(shape, 2048, 2048 + 60, alone, 1), 2048 + 60 - tile);
            assert.equal(reusedWithTilePadding(shape, 1024, 1024 + 44, alone, 1), 1024 + 44 - tile);
            // 36 tokens after 256: 28 ms as they are, 35 ms padded.
            assert.equal(reusedWithTilePadding(shape, 256, 256 + 36, alone, 1), 256);
            assert.equal(reusedWithTilePadding(shape, 4000, 4000 + 65, alone, 1), 4000, "65 new tokens fill a tile already");
            assert.equal(reusedWithTilePadding(shape, 4000, 4000 + 200, alone, 1), 4000);
            // Under a tile's share of the untiled cost per pair, padding never pays.
            assert.equal(reusedWithTilePadding(shape, 100_000, 100_000 + 18, alone, 1), 100_000);
            assert.equal(reusedWithTilePadding(shape, 40, 100, alone, 1), 40, "fewer cached tokens than the padding needs");
        }
        assert.equal(reusedWithTilePadding(shape, 4000, 4000 + 64, true, 1), 4000, "alone, 64 fill a tile");
        assert.notEqual(reusedWithTilePadding(shape, 4000, 4000 + 64, false, 1), 4000, "beside decodes, 64 leave 63 untiled");
    });

    test("once padding pays at a depth, it pays deeper; dearer weights (f16, a bigger model) need more depth", () => {
        const firstPaddedDepth = (shape: PromptCostShape, rest: number): number => {
            for (let depth = 2; depth < 200_000; depth++)
                if (reusedWithTilePadding(shape, depth, depth + rest, false, 1) !== depth)
                    return depth;
            return Infinity;
        };
        for (const rest of [30, 44, 60]) {
            const q4 = firstPaddedDepth(small("q4_0"), rest);
            assert.ok(Number.isFinite(q4), `${rest} new tokens are padded at some depth`);
            for (const depth of [q4, q4 + 1, 2 * q4, 10 * q4])
                assert.notEqual(reusedWithTilePadding(small("q4_0"), depth, depth + rest, false, 1), depth, `${rest} after ${depth}`);
            assert.ok(firstPaddedDepth(small("q8_0"), rest) > q4);
            assert.ok(firstPaddedDepth(small("other"), rest) > firstPaddedDepth(small("q8_0"), rest));
            const bigger = {...small("q4_0"), tokenWeights: 50 * small("q4_0").tokenWeights};
            assert.ok(firstPaddedDepth(bigger, rest) > firstPaddedDepth(small("other"), rest));
        }
        assert.ok(firstPaddedDepth(small("q4_0"), 60) < firstPaddedDepth(small("q4_0"), 30), "more new tokens pay sooner");
    });

    test("a prompt's pieces leave a last piece of a tile, where a shorter one would go untiled and cost more", () => {
        // Chunked prefill's pieces go beside decodes: a tile is 65 of its tokens.
        assert.equal(pieceLeavingATile(1000, 128, false, 1), 128, "plenty left");
        assert.equal(pieceLeavingATile(128 + 50, 128, false, 1), 178 - 65, "50 left: the last piece becomes a tile");
        assert.equal(pieceLeavingATile(128 + 64, 128, false, 1), 192 - 65, "64 beside decodes leave 63 untiled");
        assert.equal(pieceLeavingATile(128 + 65, 128, false, 1), 128, "a tile left already");
        assert.equal(pieceLeavingATile(128 + 12, 128, false, 1), 128, "12 one at a time cost less than a tile");
        assert.equal(pieceLeavingATile(100, 128, false, 1), 128, "all of it fits");
        // Under two tiles in all, both pieces cannot be tiles: the budget stands.
        assert.equal(pieceLeavingATile(65 + 52, 65, false, 1), 65);
        // A prompt alone goes in batches: a tile is 64.
        assert.equal(pieceLeavingATile(512 + 40, 512, true, 1), 552 - 64);
        assert.equal(pieceLeavingATile(512 + 64, 512, true, 1), 512, "alone, 64 left fill a tile");
        assert.equal(pieceLeavingATile(512 + 64, 512, false, 1), 576 - 65);
    });

    test("on two threads a tile of the demo models' 6 heads costs twice: only a longer last piece is made one", () => {
        const waste = tileWaste(tiledAttentionQueries, 6, 2);
        assert.equal(waste, 2);
        // Measured there (2048 cached, alone): 20 untiled 35 ms, 40 70 ms, 60 109 ms; 64 in a tile 68 ms.
        assert.equal(pieceLeavingATile(512 + 20, 512, true, waste), 512, "20 untiled cost half a tile");
        assert.equal(pieceLeavingATile(512 + 30, 512, true, 1), 542 - 64, "30 pay for a tile on one thread");
        assert.equal(pieceLeavingATile(512 + 30, 512, true, waste), 512, "not on two");
        assert.equal(pieceLeavingATile(512 + 60, 512, true, waste), 572 - 64, "60 untiled cost more than a tile");
        // 32 heads on 8 threads: chunks of whole tiles, as on one thread.
        assert.equal(pieceLeavingATile(512 + 30, 512, true, tileWaste(tiledAttentionQueries, 32, 8)), 542 - 64);
    });

    test("on more threads ggml's chunks cut the tiles: the padding pays less, as measured on two threads", () => {
        assert.equal(tileWaste(64, 6, 1), 1, "one thread: a tile per head");
        // Two threads, 6 heads: chunks of 48 rows, so each head's 64 rows go as 48 + 16 or 32 + 32: twice the tiles.
        assert.equal(tileWaste(64, 6, 2), 2);
        assert.ok(tileWaste(65, 6, 2) < 2.2, "65 cost about what 64 do there (48.4 vs 50.7 ms measured)");
        // 32 heads on 8 threads: chunks of a head each, every tile whole.
        assert.equal(tileWaste(64, 32, 8), 1);
        assert.ok(tileWaste(64, 32, 6) > 1.5);
        // Demo `small` q4_0 on two threads after 2048 cached: as is 35, 70, 109 ms for 20, 40, 60 new tokens; padded 68 ms.
        const shape = small("q4_0");
        const padsOn = (rest: number, threads: number): boolean =>
            reusedWithTilePadding(shape, 2048, 2048 + rest, true, tileWaste(tiledAttentionQueries, shape.queryHeads, threads)) !== 2048;
        assert.deepEqual([20, 40, 60].map((rest) => padsOn(rest, 2)), [false, false, true]);
        assert.deepEqual([20, 40, 60].map((rest) => padsOn(rest, 1)), [false, true, true]);
    });

    test("the shape: attention width from heads and head sizes, the weights one token passes through, their kind", () => {
        const layer = (i: number, type: number, experts = false) => [
            {name: `blk.${i}.attn_q.weight`, dimensions: [256, 256], ggmlType: type},
            {name: `blk.${i}.ffn_up${experts ? "_exps" : ""}.weight`, dimensions: experts ? [256, 512, 8] : [256, 512], ggmlType: type}
        ];
        const tensors = [{name: "token_embd.weight", dimensions: [256, 1000], ggmlType: 1}, ...layer(0, 2), ...layer(1, 2)];
        assert.deepEqual(promptCostShape(fileInfo({block_count: 2, embedding_length: 256, attention: {head_count: 4}}, tensors)),
            {attentionWidth: 2 * 4 * (64 + 64), tokenWeights: 2 * (256 * 256 + 256 * 512), weights: "q4_0", queryHeads: 4});
        // Heads per layer, a key length of its own, value length apart; f16 weights.
        assert.deepEqual(promptCostShape(fileInfo({block_count: 2, embedding_length: 256,
            attention: {head_count: [8, 0], key_length: 32, value_length: 48}}, [...layer(0, 1), ...layer(1, 1)])),
        {attentionWidth: 8 * (32 + 48), tokenWeights: 2 * (256 * 256 + 256 * 512), weights: "other", queryHeads: 8});
        // q8_0, and a mix where no kind holds most of the weights (q4_0 attention, q8_0 and f16 feed-forward halves).
        assert.equal(promptCostShape(fileInfo({block_count: 2, embedding_length: 256, attention: {head_count: 4}},
            [...layer(0, 8), ...layer(1, 8)]))?.weights, "q8_0");
        const mixed = [{name: "blk.0.attn_q.weight", dimensions: [256, 256], ggmlType: 2},
            {name: "blk.0.ffn_up.weight", dimensions: [256, 256], ggmlType: 8}, {name: "blk.0.ffn_down.weight", dimensions: [256, 256], ggmlType: 1}];
        assert.equal(promptCostShape(fileInfo({block_count: 1, embedding_length: 256, attention: {head_count: 4}}, mixed))?.weights, "other");
        // A mixture of experts: a token passes through its used experts only.
        assert.deepEqual(promptCostShape(fileInfo({block_count: 1, embedding_length: 256, expert_count: 8, expert_used_count: 2,
            attention: {head_count: 4}}, layer(0, 2, true)))?.tokenWeights, 256 * 256 + 2 * 256 * 512);
        // Nothing to go on, or value rows the tiles cannot take (8 floats: not a whole AVX-512 register).
        assert.equal(promptCostShape(fileInfo({block_count: 2, embedding_length: 256}, tensors)), undefined);
        assert.equal(promptCostShape(fileInfo({block_count: 2, embedding_length: 64, attention: {head_count: 8}}, tensors)), undefined);
    });

    test("read from real files: the demo models", async () => {
        const {readGgufFileInfo} = await importNodeLlamaCpp();
        const q4 = promptCostShape(await readGgufFileInfo(await ensureDemoModel({size: "small", seed: 0, dtype: "q4_0", cacheDir: testCacheDir})));
        assert.deepEqual(q4, small("q4_0"));
        const tiny = promptCostShape(await readGgufFileInfo(await tinyModelPath()));
        assert.equal(tiny?.weights, "other");
    });
});

const opening = "Once upon a time there was a little girl who lived in a small house near the big park with her dog and her cat. " +
    "Every day she went to the park to play with her friends and the dog ran after the red ball under the blue sky. ";
const question = " Then the girl asked her mother what they would do next, and her mother smiled and said that they would go " +
    "to the river to see the boats and";
const greedy = {temperature: 0, ignoreEos: true} as const;

describe("tile padding in the engine (tiny model, CPU)", () => {
    let padded: EngineUnderTest;
    let plain: EngineUnderTest;

    before(async () => {
        padded = await EngineUnderTest.start({prefixCache: true, parallel: 1, tilePadding: true});
        plain = await EngineUnderTest.start({prefixCache: true, parallel: 1, tilePadding: false});
    });
    after(async () => {
        await padded.engine.dispose();
        await plain.engine.dispose();
    });

    test("the engine's info says whether it pads (what the panel, the log and serve's start line show)", () => {
        assert.equal(padded.info?.tilePadding, true);
        assert.equal(plain.info?.tilePadding, false);
        assert.equal(formatPrefixCache(padded.info!), `on, tile padding, prompt cache ${defaultPromptCacheMiB} MiB`);
        assert.equal(formatPrefixCache(plain.info!), `on, prompt cache ${defaultPromptCacheMiB} MiB`);
        assert.equal(formatPrefixCache({...plain.info!, prefixCache: false}), "off");
    });

    test("a turn's short rest after a long conversation goes as a padded tile, and generates what it does unpadded", async () => {
        const conversation = opening.repeat(10);
        const turn = {prompt: `${conversation}${question}`, maxTokens: 12, ...greedy};
        const results = [];
        for (const engine of [padded, plain]) {
            const first = await engine.generate({prompt: conversation, maxTokens: 12, ...greedy});
            assert.equal(first.cachedTokens, 0);
            results.push({first, next: await engine.generate(turn)});
        }
        const [withPadding, without] = results as [typeof results[0], typeof results[0]];
        const prompt = without.next.finished.promptTokens;
        const rest = prompt - without.next.cachedTokens;
        assert.ok(rest > 20 && rest < tiledAttentionQueries && without.next.cachedTokens > 200,
            `the turn adds ${rest} tokens after ${without.next.cachedTokens} cached`);
        assert.equal(withPadding.next.finished.promptTokens, prompt);
        // Alone in its batch: a tile, exactly.
        assert.equal(withPadding.next.cachedTokens, prompt - tiledAttentionQueries, "the padded rest is a tile");
        assert.equal(withPadding.next.stepTokens, tiledAttentionQueries + turn.maxTokens, "exactly the padded rest is evaluated");
        assert.equal(without.next.stepTokens, rest + turn.maxTokens);
        assert.equal(withPadding.next.text, without.next.text, "the tokens evaluated again hold what they held");
        assert.equal(withPadding.first.text, without.first.text);
    });

    test("a short rest near the start of the cache, or one of a tile or more, is not padded", async () => {
        for (const engine of [padded, plain]) {
            await engine.generate({prompt: opening, maxTokens: 4, ...greedy});
            const shallow = await engine.generate({prompt: `${opening}${question}`, maxTokens: 4, ...greedy});
            assert.equal(shallow.stepTokens, shallow.finished.promptTokens - shallow.cachedTokens + 4);
            assert.ok(shallow.finished.promptTokens - shallow.cachedTokens < tiledAttentionQueries, "a short rest, not padded");
            const long = opening.repeat(5);
            await engine.generate({prompt: long, maxTokens: 4, ...greedy});
            const wide = await engine.generate({prompt: `${long}${question}${question}${question}`, maxTokens: 4, ...greedy});
            assert.ok(wide.finished.promptTokens - wide.cachedTokens > tiledAttentionQueries + 1, "a rest of a tile or more, as it is");
        }
    });

    test("beside another request's decodes, the padded rest is one more than a tile: their micro-batch takes one of its tokens", async () => {
        const beside = await EngineUnderTest.start({prefixCache: true, parallel: 2, tilePadding: true});
        const running = beside.send({prompt: "once upon a time", maxTokens: 900, ...greedy});
        try {
            while (!beside.events.some((e) => e.id === running.id && (e.kind === "tokens" || e.kind === "finished")))
                await new Promise((resolve) => setTimeout(resolve, 5));
            const conversation = opening.repeat(10);
            const turn = {prompt: `${conversation}${question}`, maxTokens: 12, ...greedy};
            await beside.generate({prompt: conversation, maxTokens: 12, ...greedy});
            const next = await beside.generate(turn);
            assert.ok(!beside.events.some((e) => e.id === running.id && e.kind === "finished"), "the other request decoded all along");
            assert.equal(next.cachedTokens, next.finished.promptTokens - tileFillingTokens(false));
            assert.equal(next.text, (await plain.generate(turn)).text, "the tokens evaluated again hold what they held");
        } finally {
            beside.engine.handle({type: "cancel", id: running.id});
            await running.done;
            await beside.engine.dispose();
        }
    });
});
