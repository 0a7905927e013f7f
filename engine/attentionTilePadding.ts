/**
 * A short rest of a prompt deep in a cached prefix, padded with cached tokens evaluated again, so that llama.cpp's CPU
 * flash attention takes it in tiles.
 *
 * ggml's CPU flash attention (ggml-cpu/ops.cpp) computes a micro-batch's queries of one sequence in tiles only when there
 * are at least 64 of them (`GGML_FA_TILE_Q`); fewer go one query at a time over every cached key, ~3–4× slower per pair
 * of query and key. Multi-turn chat hits that: each turn resends the conversation, prefix caching evaluates only what is
 * new (the last answer's end, the next question, the chat template's tokens), often 20–63 tokens, and deep in the
 * conversation their attention dominates. Bare node-llama-cpp, demo `small` q4_0, 1 thread, 2-vCPU VM (2026-12-07,
 * medians of 5): 63 tokens after 1536 cached took 183 ms, 64 tokens 61 ms; after 512, 73 and 34 ms. llama-server pays
 * the same price.
 *
 * So where the model says it pays, a request reuses fewer cached tokens: the rest of its input becomes a tile's worth
 * ({@link tileFillingTokens}), the cached tokens before it evaluated again (the same tokens at the same positions: the
 * KV cache ends as it would have). That costs the extra tokens' weights, which grow with the model, and saves attention,
 * which grows with the depth, so the choice compares both from the model's shape (`promptCostShape`) with costs measured
 * on the VM above. The estimate leaves a margin ({@link requiredSaving}): a choice near the break-even saves little
 * either way, and another CPU's kernels weigh differently.
 *
 * The costs are one thread's. With more threads ggml splits a micro-batch's query rows (queries × heads) into chunks,
 * the tiles end at the chunks' edges too, and a part-used tile costs a whole one, so the tiles save less
 * ({@link tileWaste}): on two threads (same model and VM) 20 new tokens after 2048 cached took 35 ms as they were and
 * 68 ms as 64, 40 took 70 and 68 ms, 60 took 109 and 68 ms, where one thread's costs alone would pad the 40 too.
 */
import type {GgufFileInfo} from "./llamaTypes.js";

/** Queries of one sequence in a micro-batch from which ggml's CPU flash attention works in tiles (GGML_FA_TILE_Q). */
export const tiledAttentionQueries = 64;

/**
 * The tokens a piece of a prompt needs to fill one tile exactly: a tile's 64 when the piece is alone in its batch; one
 * more beside other sequences' one-token decodes, because llama.cpp splits a batch holding several sequences into
 * micro-batches with the same number of tokens of each, so the decodes take one of its tokens into their micro-batch and
 * the tile's 64 go in the next. A tile costs about the same however few of its 64 queries are used: alone, 65 tokens are
 * a tile and a tile of one. Bare node-llama-cpp, demo `small` q4_0, 1 thread, 2-vCPU VM, 1500 cached tokens (2026-12-07,
 * medians of 5): alone, 64 tokens took 60 ms, 65 96 ms, 63 (no tile) 167 ms; beside three one-token decodes, 65 took
 * 67 ms, 66 108 ms, 64 165 ms.
 */
export function tileFillingTokens(alone: boolean): number {
    return alone ? tiledAttentionQueries : tiledAttentionQueries + 1;
}

/**
 * The cost of a pair of query and cached key one query at a time, against in tiles: 3.1–4.2 measured (demo `small`
 * q4_0 and f16, `medium` f16, at 512 and 1536 cached tokens; the setup above).
 */
const untiledAttentionCost = 3.5;

/**
 * A token's weights' cost, per weight, in units of a tiled query-key pair's cost per attention width (see
 * {@link PromptCostShape}), measured as above: q4_0 0.53, q8_0 0.75, f16 1.0–1.4. Kinds not measured (the k-quants
 * among them) take f16's, the dearest: they pad only deeper.
 */
const weightCost = {q4_0: 0.6, q8_0: 0.85, other: 1.6} as const;

/** The estimated cost of the padded rest must be at most this share of the rest as it is. */
export const requiredSaving = 0.85;

/** What the cost of evaluating prompt tokens depends on, read from a model's GGUF file. */
export type PromptCostShape = {
    /** Summed over layers: query heads × (key length + value length), the attention work per pair of query and key. */
    attentionWidth: number,
    /** The layers' weights one token passes through (of a mixture of experts, the share its used experts hold). */
    tokenWeights: number,
    /** The kind most of the layers' weights are: q4_0's and q8_0's CPU kernels were measured cheaper per weight than f16's. */
    weights: keyof typeof weightCost,
    /** Query heads of most layers: with the threads, where ggml's chunks cut the tiles ({@link tileWaste}). */
    queryHeads: number
};

/**
 * The query rows a micro-batch's flash attention computes in tiles, per row it needs, for `queries` of one sequence
 * (at least a tile) over `heads` query heads on `threads` threads: 1 where every tile is full. ggml (ggml-cpu/ops.cpp,
 * the bundled release) splits the `queries × heads` rows into chunks, four per thread (one chunk on one thread), a tile
 * ends at a chunk's edge and at a head's, and a part-used tile computes all 64 rows.
 */
export function tileWaste(queries: number, heads: number, threads: number): number {
    const rows = queries * heads;
    let chunks = threads;
    if (threads > 1) {
        const chunkSize = Math.ceil(rows / (threads * 4));
        chunks = Math.max(threads, Math.ceil(rows / chunkSize));
    }
    const perChunk = Math.ceil(rows / chunks);
    let tiles = 0;
    for (let row = 0; row < rows;) {
        const chunkEnd = Math.min(rows, (Math.floor(row / perChunk) + 1) * perChunk);
        const headEnd = (Math.floor(row / queries) + 1) * queries;
        row += Math.min(tiledAttentionQueries, chunkEnd - row, headEnd - row);
        tiles++;
    }
    return tiles * tiledAttentionQueries / rows;
}

/** ggml's type ids (GgmlType) of the kinds measured. */
const ggmlTypes: ReadonlyMap<number, keyof typeof weightCost> = new Map([[2, "q4_0"], [8, "q8_0"]]);

/** The shape of a transformer's prompt cost; undefined when the file does not say enough (heads, layers, tensors). */
export function promptCostShape(info: GgufFileInfo): PromptCostShape | undefined {
    const metadata = info.architectureMetadata as {
        block_count?: number, embedding_length?: number, expert_count?: number, expert_used_count?: number,
        attention?: {head_count?: number | number[], key_length?: number, value_length?: number}
    };
    const layers = metadata.block_count;
    const heads = metadata.attention?.head_count;
    const tensors = info.fullTensorInfo;
    if (layers === undefined || heads === undefined || metadata.embedding_length === undefined || tensors === undefined)
        return undefined;
    const headsPerLayer = Array.isArray(heads) ? heads : Array.from({length: layers}, () => heads);
    let attentionWidth = 0;
    const layersByHeads = new Map<number, number>();
    for (const count of headsPerLayer) {
        if (count === 0)
            continue;
        layersByHeads.set(count, (layersByHeads.get(count) ?? 0) + 1);
        const keyLength = metadata.attention?.key_length ?? metadata.embedding_length / count;
        const valueLength = metadata.attention?.value_length ?? keyLength;
        // The tiles need value rows of whole SIMD registers (16 floats covers AVX-512; AVX2 and NEON need fewer).
        if (valueLength % 16 !== 0)
            return undefined;
        attentionWidth += count * (keyLength + valueLength);
    }
    const expertShare = metadata.expert_count !== undefined && metadata.expert_count > 0 && metadata.expert_used_count !== undefined
        ? metadata.expert_used_count / metadata.expert_count : 1;
    let tokenWeights = 0;
    const byKind = new Map<keyof typeof weightCost, number>();
    for (const tensor of tensors) {
        if (!tensor.name.startsWith("blk."))
            continue;
        const elements = tensor.dimensions.reduce<number>((product, size) => product * Number(size), 1);
        const used = tensor.name.includes("_exps") ? elements * expertShare : elements;
        tokenWeights += used;
        const kind = ggmlTypes.get(tensor.ggmlType as number) ?? "other";
        byKind.set(kind, (byKind.get(kind) ?? 0) + used);
    }
    if (attentionWidth <= 0 || tokenWeights <= 0)
        return undefined;
    const main = [...byKind].find(([, weights]) => weights > tokenWeights / 2)?.[0] ?? "other";
    const queryHeads = [...layersByHeads].reduce((most, entry) => entry[1] > most[1] ? entry : most)[0];
    return {attentionWidth, tokenWeights, weights: main, queryHeads};
}

/**
 * How many of `reusable` cached leading tokens a request reuses, of an input of `inputLength` tokens: all of them, or,
 * where evaluating a tile's worth ({@link tileFillingTokens}; `alone`: no other sequence decodes in its batch) is
 * estimated to cost at most {@link requiredSaving} of the rest as it is, all but that many. `waste`: a tile's cost on
 * the engine's threads against one thread's ({@link tileWaste} of a tile's queries over `shape.queryHeads`).
 */
export function reusedWithTilePadding(
    shape: PromptCostShape, reusable: number, inputLength: number, alone: boolean, waste: number
): number {
    const tile = tileFillingTokens(alone);
    const rest = inputLength - reusable;
    const padded = inputLength - tile;
    if (rest >= tile || padded <= 0)
        return reusable;
    const perToken = weightCost[shape.weights] * shape.tokenWeights / shape.attentionWidth;
    // Query-key pairs of `count` tokens from position `from` (each attends to the cached tokens and to those before it).
    const pairs = (from: number, count: number): number => count * from + count * (count + 1) / 2;
    const asItIs = rest * perToken + untiledAttentionCost * pairs(reusable, rest);
    const tiled = tile * perToken + waste * pairs(padded, tile);
    return tiled <= requiredSaving * asItIs ? padded : reusable;
}

/**
 * The next piece of a prompt that goes in pieces of at most `limit` tokens (chunked prefill's share of a step, or a
 * batch), `rest` tokens of it still to go: `limit`, unless that leaves a last piece too short for a tile and long enough
 * to cost more one query at a time than a tile does; then all but a tile's worth ({@link tileFillingTokens}; `alone`:
 * no other sequence decodes in its batch), so the last piece fills a tile. `waste`: a tile's cost on the engine's
 * threads against one thread's ({@link tileWaste} of a tile's queries): on two threads and the demo models' 6 heads a
 * tile costs twice, so only a last piece of more than ~36 tokens is worth making one (40 untiled took 70 ms there, 64
 * in a tile 68 ms).
 * Deep in a long prompt a short last piece was the longest step of all: on the demo `small` q4_0 with pieces of 128, a
 * 2100-token prompt left 52 tokens after 2048, one query at a time, and the running requests' gap there was 175–226 ms
 * where the deepest full pieces took ~150 ms; left a tile, it was 90–108 ms (one thread).
 */
export function pieceLeavingATile(rest: number, limit: number, alone: boolean, waste: number): number {
    const tile = tileFillingTokens(alone);
    const left = rest - limit;
    const untiledCostsMore = left * untiledAttentionCost > tile * waste && left < tile;
    return untiledCostsMore && rest - tile >= tile ? rest - tile : limit;
}
