/**
 * Minimal streaming GGUF v3 writer (little endian).
 *
 * Supports the metadata value kinds a llama-style model needs (strings, integers,
 * floats, bools and arrays of strings / int32 / float32) and F32 / F16 / Q8_0 / Q4_0 tensors
 * (the two block quantizations encoded as llama.cpp's reference quantizers do).
 * The header (metadata + tensor infos) is built in memory — it is small — while
 * tensor data is produced chunk by chunk by each tensor's source and written
 * straight to the file, so multi-hundred-megabyte files never exist as one Buffer.
 *
 * Layout: magic "GGUF", version 3, tensor count (u64), KV count (u64), KV pairs,
 * tensor infos, zero padding up to `alignment`, then the data section in which
 * every tensor starts at an offset that is a multiple of `alignment`.
 */
import type {FileHandle} from "node:fs/promises";
import os from "node:os";

/** GGUF default data alignment (used when `general.alignment` is absent). */
export const GGUF_DEFAULT_ALIGNMENT = 32;
const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
const GGUF_VERSION = 3;

/** GGUF metadata value type ids (gguf.h `enum gguf_type`). */
const enum GgufValueTypeId {
    Uint32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9
}

/** A typed metadata value; the tag decides the on-disk GGUF type. */
export type GgufMetadataValue =
    | {readonly type: "string", readonly value: string}
    | {readonly type: "uint32", readonly value: number}
    | {readonly type: "int32", readonly value: number}
    | {readonly type: "float32", readonly value: number}
    | {readonly type: "bool", readonly value: boolean}
    | {readonly type: "stringArray", readonly value: readonly string[]}
    | {readonly type: "int32Array", readonly value: readonly number[] | Int32Array}
    | {readonly type: "float32Array", readonly value: readonly number[] | Float32Array};

export interface GgufMetadataEntry {
    readonly key: string,
    readonly value: GgufMetadataValue
}

/** Tensor element types this writer can encode. */
export type GgufTensorType = "F32" | "F16" | "Q8_0" | "Q4_0";

/** ggml's `enum ggml_type` id, elements per block and bytes per block of each type. */
const ggmlTypes: Record<GgufTensorType, {readonly id: number, readonly blockSize: number, readonly blockBytes: number}> = {
    F32: {id: 0, blockSize: 1, blockBytes: 4},
    F16: {id: 1, blockSize: 1, blockBytes: 2},
    Q4_0: {id: 2, blockSize: 32, blockBytes: 18},
    Q8_0: {id: 8, blockSize: 32, blockBytes: 34}
};

/** Fills `out` with the next `out.length` elements of a tensor (row-major in ggml order). */
export type TensorChunkSource = (out: Float32Array) => void;

export interface GgufTensorSpec {
    /** Tensor name, e.g. `blk.0.attn_q.weight`. */
    readonly name: string,
    /**
     * Dimensions in ggml order: the innermost (input) dimension first, e.g. `token_embd.weight` is `[E, V]`.
     * For Q8_0 / Q4_0 the first must be a multiple of 32 (blocks never cross rows).
     */
    readonly dims: readonly number[],
    /** On-disk element type. */
    readonly type: GgufTensorType,
    /**
     * Creates a fresh source for the tensor's values. It is called once per write and the returned
     * function is then called with consecutive chunks until all elements were produced.
     */
    readonly createSource: () => TensorChunkSource
}

/** Options for {@link writeGguf} / {@link computeGgufLayout}. */
export interface GgufWriteOptions {
    /** Data alignment in bytes (power of two). Default {@link GGUF_DEFAULT_ALIGNMENT} (32); other values add `general.alignment`. */
    readonly alignment?: number,
    /** Elements generated and written per chunk (rounded down to whole blocks, at least one). Default 1 048 576 (4 MiB of F32 scratch). */
    readonly chunkElements?: number
}

export interface GgufTensorLayout {
    readonly name: string,
    readonly elementCount: number,
    /** Offset of the tensor data relative to the start of the data section (multiple of the alignment). */
    readonly offset: number,
    readonly byteLength: number
}

export interface GgufLayout {
    /** Serialized header: magic, counts, metadata, tensor infos (without the alignment padding). */
    readonly header: Buffer,
    /** Absolute file offset of the data section (header length rounded up to the alignment). */
    readonly dataOffset: number,
    readonly tensors: readonly GgufTensorLayout[],
    /** Exact size of the finished file in bytes. */
    readonly totalBytes: number,
    readonly alignment: number
}

export function alignTo(offset: number, alignment: number): number {
    return Math.ceil(offset / alignment) * alignment;
}

/** Number of elements of a tensor with the given dimensions. */
export function elementCountOf(dims: readonly number[]): number {
    return dims.reduce((product, d) => product * d, 1);
}

/** Serializes the header and computes every offset without producing tensor data. */
export function computeGgufLayout(
    metadata: readonly GgufMetadataEntry[],
    tensors: readonly GgufTensorSpec[],
    options: GgufWriteOptions = {}
): GgufLayout {
    const alignment = options.alignment ?? GGUF_DEFAULT_ALIGNMENT;
    if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0)
        throw new RangeError(`GGUF alignment must be a positive power of two, got ${alignment}`);

    const entries = [...metadata];
    if (alignment !== GGUF_DEFAULT_ALIGNMENT && !entries.some((e) => e.key === "general.alignment"))
        entries.push({key: "general.alignment", value: {type: "uint32", value: alignment}});
    assertUniqueKeys(entries);

    const out = new ByteSink();
    out.u32(GGUF_MAGIC);
    out.u32(GGUF_VERSION);
    out.u64(tensors.length);
    out.u64(entries.length);
    for (const entry of entries) {
        out.str(entry.key);
        writeValue(out, entry.value);
    }

    const layouts: GgufTensorLayout[] = [];
    let dataCursor = 0;
    for (const tensor of tensors) {
        validateTensor(tensor);
        const elementCount = elementCountOf(tensor.dims);
        const {id, blockSize, blockBytes} = ggmlTypes[tensor.type];
        const byteLength = (elementCount / blockSize) * blockBytes;
        dataCursor = alignTo(dataCursor, alignment);
        layouts.push({name: tensor.name, elementCount, offset: dataCursor, byteLength});
        out.str(tensor.name);
        out.u32(tensor.dims.length);
        for (const d of tensor.dims) out.u64(d);
        out.u32(id);
        out.u64(dataCursor);
        dataCursor += byteLength;
    }

    const header = out.toBuffer();
    const dataOffset = alignTo(header.length, alignment);
    return {header, dataOffset, tensors: layouts, totalBytes: dataOffset + dataCursor, alignment};
}

/**
 * Writes a complete GGUF file to an open, empty, writable file handle, starting at position 0.
 * Returns the layout that was written (its `totalBytes` equals the bytes written).
 */
export async function writeGguf(
    file: FileHandle,
    metadata: readonly GgufMetadataEntry[],
    tensors: readonly GgufTensorSpec[],
    options: GgufWriteOptions = {}
): Promise<GgufLayout> {
    const chunkElements = options.chunkElements ?? 1 << 20;
    if (!Number.isInteger(chunkElements) || chunkElements <= 0)
        throw new RangeError(`chunkElements must be a positive integer, got ${chunkElements}`);
    const layout = computeGgufLayout(metadata, tensors, options);

    let position = 0;
    const write = async (bytes: Uint8Array): Promise<void> => {
        let done = 0;
        while (done < bytes.length) {
            const {bytesWritten} = await file.write(bytes, done, bytes.length - done, position);
            done += bytesWritten;
            position += bytesWritten;
        }
    };
    const padTo = async (target: number): Promise<void> => {
        if (target > position) await write(new Uint8Array(target - position));
    };

    await write(layout.header);
    await padTo(layout.dataOffset);

    const maxBlockSize = Math.max(...Object.values(ggmlTypes).map((type) => type.blockSize));
    const scratch = new Float32Array(Math.max(chunkElements, maxBlockSize));
    const encoded = Buffer.from(new ArrayBuffer(scratch.length * 4));
    for (let t = 0; t < tensors.length; t++) {
        const tensor = tensors[t];
        const tensorLayout = layout.tensors[t];
        await padTo(layout.dataOffset + tensorLayout.offset);
        const {blockSize} = ggmlTypes[tensor.type];
        const step = Math.max(blockSize, chunkElements - (chunkElements % blockSize));
        const source = tensor.createSource();
        for (let done = 0; done < tensorLayout.elementCount;) {
            const n = Math.min(step, tensorLayout.elementCount - done);
            const values = scratch.subarray(0, n);
            source(values);
            await write(encodeTensorData(tensor.type, values, encoded));
            done += n;
        }
    }
    await padTo(layout.totalBytes);
    if (position !== layout.totalBytes)
        throw new Error(`GGUF writer bug: wrote ${position} bytes, layout expects ${layout.totalBytes}`);
    return layout;
}

/** `values` in the on-disk encoding of `type`, written into `scratch` (at least 4 bytes per value); returns the bytes. */
function encodeTensorData(type: GgufTensorType, values: Float32Array, scratch: Buffer): Uint8Array {
    switch (type) {
        case "F32":
            return toLittleEndianBytes(values, 4);
        case "F16": {
            const half = new Uint16Array(scratch.buffer, scratch.byteOffset, values.length);
            return toLittleEndianBytes(encodeF16(values, half), 2);
        }
        case "Q8_0":
            return quantizeQ8_0(values, scratch);
        case "Q4_0":
            return quantizeQ4_0(values, scratch);
    }
}

// ---------------------------------------------------------------------------------------------
// block quantization (ggml-quants.c: quantize_row_q8_0_ref, quantize_row_q4_0_ref), computed in float32 as C does

const QK = 32;
const {fround} = Math;

/** C's `roundf`: halves away from zero. */
function roundHalfAwayFromZero(x: number): number {
    return x < 0 ? -Math.round(-x) : Math.round(x);
}

/**
 * Q8_0: per 32 values, an f16 scale `d = max|x| / 127` then 32 int8 `round(x / d)`; 34 bytes a block.
 * `values.length` must be a multiple of 32; returns the encoded bytes (a view of `out`).
 */
export function quantizeQ8_0(values: Float32Array, out: Buffer): Buffer {
    const blocks = values.length / QK;
    for (let b = 0; b < blocks; b++) {
        const base = b * QK;
        let amax = 0;
        for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[base + j]));
        const d = fround(amax / 127);
        const id = d !== 0 ? fround(1 / d) : 0;
        const at = b * 34;
        out.writeUInt16LE(float32ToFloat16Bits(d), at);
        for (let j = 0; j < QK; j++) out.writeInt8(roundHalfAwayFromZero(fround(values[base + j] * id)), at + 2 + j);
    }
    return out.subarray(0, blocks * 34);
}

/**
 * Q4_0: per 32 values, an f16 scale `d = m / -8` (m: the value of largest magnitude, sign kept) then
 * 16 bytes of 4-bit quants `q = x / d + 8` clamped to 0..15: byte j holds value j in its low nibble
 * and value j + 16 in its high nibble; 18 bytes a block. `values.length` must be a multiple of 32.
 */
export function quantizeQ4_0(values: Float32Array, out: Buffer): Buffer {
    const blocks = values.length / QK;
    for (let b = 0; b < blocks; b++) {
        const base = b * QK;
        let amax = 0;
        let max = 0;
        for (let j = 0; j < QK; j++) {
            const v = values[base + j];
            if (amax < Math.abs(v)) {
                amax = Math.abs(v);
                max = v;
            }
        }
        const d = fround(max / -8);
        const id = d !== 0 ? fround(1 / d) : 0;
        const at = b * 18;
        out.writeUInt16LE(float32ToFloat16Bits(d), at);
        const nibble = (x: number): number => Math.min(15, Math.trunc(fround(fround(x * id) + 8.5)));
        for (let j = 0; j < QK / 2; j++)
            out[at + 2 + j] = nibble(values[base + j]) | (nibble(values[base + QK / 2 + j]) << 4);
    }
    return out.subarray(0, blocks * 18);
}

// ---------------------------------------------------------------------------------------------
// float32 -> float16

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE 754 binary16 bits of `value`, rounded to nearest, ties to even (NaN → quiet NaN, overflow → ±Inf). */
export function float32ToFloat16Bits(value: number): number {
    f32Scratch[0] = value;
    return f32BitsToF16Bits(u32Scratch[0]);
}

/** Encodes `src` into `dst` (same length) as binary16 bit patterns; returns `dst`. */
export function encodeF16(src: Float32Array, dst: Uint16Array): Uint16Array {
    const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
    for (let i = 0; i < bits.length; i++) dst[i] = f32BitsToF16Bits(bits[i]);
    return dst;
}

function f32BitsToF16Bits(x: number): number {
    const sign = (x >>> 16) & 0x8000;
    const exponent = (x >>> 23) & 0xff;
    const mantissa = x & 0x7fffff;
    if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 | (mantissa >>> 13) : 0);
    const e = exponent - 112; // rebias 127 -> 15
    if (e >= 0x1f) return sign | 0x7c00;
    if (e <= 0) {
        // Subnormal half (or zero): value = full * 2^(e - 14 - 10) with the implicit bit restored.
        if (e < -10) return sign;
        const full = mantissa | 0x800000;
        const shift = 14 - e;
        const halfway = 1 << (shift - 1);
        const rest = full & ((1 << shift) - 1);
        let r = full >>> shift;
        if (rest > halfway || (rest === halfway && (r & 1) === 1)) r++;
        return sign | r;
    }
    let r = (e << 10) | (mantissa >>> 13);
    const rest = mantissa & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (r & 1) === 1)) r++; // a carry correctly bumps the exponent (up to Inf)
    return sign | r;
}

// ---------------------------------------------------------------------------------------------
// helpers

const hostIsLittleEndian = os.endianness() === "LE";

function toLittleEndianBytes(values: Float32Array | Uint16Array, width: 2 | 4): Uint8Array {
    const bytes = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
    if (hostIsLittleEndian) return bytes;
    const copy = Buffer.from(bytes);
    return width === 2 ? copy.swap16() : copy.swap32();
}

function validateTensor(tensor: GgufTensorSpec): void {
    if (tensor.dims.length < 1 || tensor.dims.length > 4)
        throw new RangeError(`Tensor ${tensor.name}: 1 to 4 dimensions supported, got ${tensor.dims.length}`);
    for (const d of tensor.dims)
        if (!Number.isSafeInteger(d) || d <= 0) throw new RangeError(`Tensor ${tensor.name}: invalid dimension ${d}`);
    if (!Number.isSafeInteger(elementCountOf(tensor.dims) * 4)) throw new RangeError(`Tensor ${tensor.name} is too large`);
    const {blockSize} = ggmlTypes[tensor.type];
    if (tensor.dims[0] % blockSize !== 0)
        throw new RangeError(`Tensor ${tensor.name}: a ${tensor.type} row must be a multiple of ${blockSize} values, got ${tensor.dims[0]}`);
}

function assertUniqueKeys(entries: readonly GgufMetadataEntry[]): void {
    const seen = new Set<string>();
    for (const {key} of entries) {
        if (seen.has(key)) throw new Error(`Duplicate GGUF metadata key: ${key}`);
        seen.add(key);
    }
}

function writeValue(out: ByteSink, value: GgufMetadataValue): void {
    switch (value.type) {
        case "string":
            out.u32(GgufValueTypeId.String);
            out.str(value.value);
            return;
        case "uint32":
            out.u32(GgufValueTypeId.Uint32);
            out.u32(value.value);
            return;
        case "int32":
            out.u32(GgufValueTypeId.Int32);
            out.i32(value.value);
            return;
        case "float32":
            out.u32(GgufValueTypeId.Float32);
            out.f32(value.value);
            return;
        case "bool":
            out.u32(GgufValueTypeId.Bool);
            out.u8(value.value ? 1 : 0);
            return;
        case "stringArray":
            out.u32(GgufValueTypeId.Array);
            out.u32(GgufValueTypeId.String);
            out.u64(value.value.length);
            for (const s of value.value) out.str(s);
            return;
        case "int32Array":
            out.u32(GgufValueTypeId.Array);
            out.u32(GgufValueTypeId.Int32);
            out.u64(value.value.length);
            for (const v of value.value) out.i32(v);
            return;
        case "float32Array":
            out.u32(GgufValueTypeId.Array);
            out.u32(GgufValueTypeId.Float32);
            out.u64(value.value.length);
            for (const v of value.value) out.f32(v);
            return;
    }
}

/** Growable little-endian byte buffer for the header. */
class ByteSink {
    private buf = Buffer.alloc(64 * 1024);
    private length = 0;

    private reserve(n: number): void {
        if (this.length + n <= this.buf.length) return;
        const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
        this.buf.copy(next, 0, 0, this.length);
        this.buf = next;
    }

    u8(v: number): void {
        this.reserve(1);
        this.length = this.buf.writeUInt8(v, this.length);
    }

    u32(v: number): void {
        this.reserve(4);
        this.length = this.buf.writeUInt32LE(v, this.length);
    }

    i32(v: number): void {
        this.reserve(4);
        this.length = this.buf.writeInt32LE(v, this.length);
    }

    f32(v: number): void {
        this.reserve(4);
        this.length = this.buf.writeFloatLE(v, this.length);
    }

    u64(v: number): void {
        this.reserve(8);
        this.length = this.buf.writeBigUInt64LE(BigInt(v), this.length);
    }

    str(s: string): void {
        const bytes = Buffer.from(s, "utf8");
        this.u64(bytes.length);
        this.reserve(bytes.length);
        bytes.copy(this.buf, this.length);
        this.length += bytes.length;
    }

    toBuffer(): Buffer {
        return Buffer.from(this.buf.subarray(0, this.length));
    }
}
