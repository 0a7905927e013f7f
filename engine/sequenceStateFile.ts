/**
 * Checks a sequence state file (llama.cpp's `llama_state_seq_save_file` format, which node-llama-cpp's
 * `saveStateToFile` and llama-server's slot save both write) before it is loaded.
 *
 * llama.cpp reads such a file trusting its length: a file cut short inside its last block of KV data is read past its
 * end without an error, and then `GGML_ASSERT(nread <= state_size)` aborts the whole process (tested on node-llama-cpp
 * 3.21.1: a state file one byte short killed the process). Files cut elsewhere, or of another model or layout, fail
 * cleanly inside llama.cpp. So a file a user names is walked here, header by header, and loaded only when its headers
 * account for exactly its length, with as many memory blocks as this context writes (an iSWA model writes two) and
 * tokens this model has.
 *
 * The layout walked (version 3): magic `ggsq`, version, token count, the tokens (int32 each); then per memory block
 * (llama_kv_cache): its stream count, and per stream its cell count and, for a non-empty stream, 12 bytes per cell
 * (position, sequence count 1, sequence id), the V-transposed flag, the layer count, each layer's K (type, row size,
 * rows), and each layer's V (type, row size, rows; or transposed: type, element size, width, columns). Memory of other
 * kinds (recurrent, hybrid) or cells with extra fields (M-RoPE) do not add up, and are refused rather than risked.
 *
 * llama-server writes its tokens packed (its `server_tokens` state: −1, version 1, the token count and tokens, then the
 * media chunks' count and data, as int32 words) where node-llama-cpp writes the plain list and reads the file's list as
 * the sequence's tokens. A packed list without media is unpacked (`plainTokens`), and the file loaded through a copy
 * with the plain list; the KV data that follows is the same either way.
 */
import fs from "node:fs/promises";

const magic = 0x67677371; // 'ggsq'
const version = 3;
/** Bounds no real file comes near: a header beyond them is garbage, not a model. */
const maxStreams = 4096;
const maxLayers = 4096;
const maxRowBytes = 2 ** 40;

export class StateFileError extends Error {}

/** A packed token list, unpacked: the tokens, and the offset where the file's KV data begins. */
export type PackedTokens = {plainTokens: Int32Array, dataOffset: number};

/** What a state file holds, and what its memory blocks look like. */
export type StateFileLayout = {
    /** Its tokens (the sequence's cached prompt and output). */
    tokens: number,
    /** With the tokens packed as llama-server packs them: the plain list, and where the KV data begins. */
    packed?: PackedTokens,
    /** Each memory block's stream count. */
    blockStreams: number[],
    /** V entries per non-empty stream (undefined: every stream was empty, so the file does not tell). */
    vEntries: number | undefined,
    bytes: number
};

/** What a file must match to be loaded into a sequence of this context (from a state file this context saved). */
export type StateFileExpectation = {
    blockStreams: readonly number[],
    vEntries: number | undefined,
    /** Tokens a sequence holds at most. */
    maxTokens: number,
    /** Token ids must be below it (undefined: unknown, not checked). */
    vocabularySize: number | undefined
};

/** Reads little-endian integers at increasing offsets of a file, throwing StateFileError past its end. */
class Cursor {
    offset = 0;

    constructor(private readonly file: fs.FileHandle, readonly size: number) {}

    private async read(bytes: number): Promise<Buffer> {
        if (this.offset + bytes > this.size)
            throw new StateFileError(`it is cut short: it ends at byte ${this.size}, inside a header that needs byte ${this.offset + bytes}`);
        const buffer = Buffer.alloc(bytes);
        await this.file.read(buffer, 0, bytes, this.offset);
        this.offset += bytes;
        return buffer;
    }

    async u32(): Promise<number> {
        return (await this.read(4)).readUInt32LE(0);
    }

    async i32(): Promise<number> {
        return (await this.read(4)).readInt32LE(0);
    }

    async u64(): Promise<number> {
        const value = (await this.read(8)).readBigUInt64LE(0);
        if (value > BigInt(maxRowBytes))
            throw new StateFileError(`a row size of ${value} bytes is not a model's`);
        return Number(value);
    }

    async int32s(count: number): Promise<Int32Array> {
        const buffer = await this.read(count * 4);
        return new Int32Array(buffer.buffer, buffer.byteOffset, count);
    }

    skip(bytes: number, what: string): void {
        if (this.offset + bytes > this.size)
            throw new StateFileError(`it is cut short: ${what} needs ${this.offset + bytes} bytes, the file has ${this.size}`);
        this.offset += bytes;
    }
}

/** The layout of the state file at `path`, its headers checked against its length; throws StateFileError. */
export async function readStateFileLayout(path: string, expected?: StateFileExpectation): Promise<StateFileLayout> {
    const file = await fs.open(path, "r");
    try {
        const cursor = new Cursor(file, (await file.stat()).size);
        if (await cursor.u32() !== magic)
            throw new StateFileError("it is not a sequence state file (no 'ggsq' magic)");
        const fileVersion = await cursor.u32();
        if (fileVersion !== version)
            throw new StateFileError(`it is a version ${fileVersion} sequence state file; this llama.cpp reads version ${version}`);
        const words = await cursor.u32();
        if (words > (cursor.size - cursor.offset) / 4)
            throw new StateFileError(`it is cut short: its token list of ${words} does not fit in it`);
        const list = await cursor.int32s(words);
        const packed = list[0] === -1 ? unpackServerTokens(list) : undefined;
        const ids = packed ?? list;
        const tokens = ids.length;
        if (expected !== undefined && tokens > expected.maxTokens)
            throw new StateFileError(`it holds ${tokens} tokens, a sequence here holds at most ${expected.maxTokens}`);
        const vocabularySize = expected?.vocabularySize;
        if (vocabularySize !== undefined) {
            const outside = ids.find((id) => id < 0 || id >= vocabularySize);
            if (outside !== undefined)
                throw new StateFileError(`it holds token ${outside}, which this model's vocabulary (${vocabularySize}) does not have`);
        }
        const blockStreams: number[] = [];
        let vEntries = expected?.vEntries;
        const blocks = expected?.blockStreams.length;
        while (blocks !== undefined ? blockStreams.length < blocks : cursor.offset < cursor.size) {
            const streams = await cursor.u32();
            if (streams === 0 || streams > maxStreams || (expected !== undefined && streams !== expected.blockStreams[blockStreams.length]))
                throw new StateFileError(`its memory block ${blockStreams.length} has ${streams} streams` +
                    (expected !== undefined ? `, this context's ${expected.blockStreams[blockStreams.length]}` : ""));
            blockStreams.push(streams);
            for (let stream = 0; stream < streams; stream++)
                vEntries = await walkStream(cursor, expected?.maxTokens, vEntries);
        }
        if (cursor.offset !== cursor.size)
            throw new StateFileError(`its headers account for ${cursor.offset} bytes, but it has ${cursor.size}`);
        return {tokens, blockStreams, vEntries, bytes: cursor.size,
            ...packed !== undefined ? {packed: {plainTokens: packed, dataOffset: 12 + words * 4}} : {}};
    } finally {
        await file.close();
    }
}

/** llama-server's packed token list (−1, version, count, tokens, media count, media…): its tokens, if it has no media. */
function unpackServerTokens(words: Int32Array): Int32Array {
    if (words.length < 4 || words[1] !== 1)
        throw new StateFileError(`its token list is packed in a way this server does not know (version ${words[1]})`);
    const count = words[2]!;
    if (count < 0 || 3 + count + 1 > words.length)
        throw new StateFileError("its packed token list is cut short");
    if (words[3 + count] !== 0)
        throw new StateFileError("it holds media (images, audio), which this server cannot restore without their projector");
    if (3 + count + 1 !== words.length)
        throw new StateFileError("its packed token list has more in it than tokens");
    return words.subarray(3, 3 + count);
}

/**
 * Writes `copy`: the state file `source` with its packed token list (its layout's `packed`) replaced by the plain list,
 * as node-llama-cpp reads it.
 */
export async function writePlainTokenCopy(source: string, packed: PackedTokens, copy: string): Promise<void> {
    const {plainTokens, dataOffset} = packed;
    const header = Buffer.alloc(12 + plainTokens.length * 4);
    header.writeUInt32LE(magic, 0);
    header.writeUInt32LE(version, 4);
    header.writeUInt32LE(plainTokens.length, 8);
    Buffer.from(plainTokens.buffer, plainTokens.byteOffset, plainTokens.byteLength).copy(header, 12);
    const output = await fs.open(copy, "w");
    try {
        await output.write(header);
        const input = await fs.open(source, "r");
        try {
            for await (const chunk of input.createReadStream({start: dataOffset, autoClose: false}))
                await output.write(chunk as Buffer);
        } finally {
            await input.close();
        }
    } finally {
        await output.close();
    }
}

/** One stream of a memory block; returns the V entries per layer set seen (the one given, or this stream's). */
async function walkStream(cursor: Cursor, maxCells: number | undefined, vEntries: number | undefined): Promise<number | undefined> {
    const cells = await cursor.u32();
    if (cells === 0)
        return vEntries;
    if (maxCells !== undefined && cells > maxCells)
        throw new StateFileError(`a stream holds ${cells} cells, a sequence here at most ${maxCells}`);
    cursor.skip(cells * 12, "the cells' positions");
    const transposed = await cursor.u32();
    const layers = await cursor.u32();
    if (transposed > 1 || layers === 0 || layers > maxLayers)
        throw new StateFileError(`its KV data header (V transposed ${transposed}, ${layers} layers) is not a model's`);
    for (let layer = 0; layer < layers; layer++) {
        await cursor.i32();
        cursor.skip(cells * await cursor.u64(), `layer ${layer}'s K rows`);
    }
    const entries = vEntries ?? layers;
    for (let layer = 0; layer < entries; layer++) {
        await cursor.i32();
        if (transposed === 1) {
            const elementBytes = await cursor.u32();
            const width = await cursor.u32();
            cursor.skip(width * cells * elementBytes, `layer ${layer}'s V columns`);
        } else
            cursor.skip(cells * await cursor.u64(), `layer ${layer}'s V rows`);
    }
    return entries;
}
