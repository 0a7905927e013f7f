/**
 * Pure-JS validation of a GGUF model file, run BEFORE handing it to llama.cpp.
 *
 * llama.cpp aborts the whole process (uncatchable) on some malformed files — e.g. a llama model
 * without `llama.feed_forward_length` — and node-llama-cpp's metadata reader
 * silently reads zeros past the end of a truncated file. So we first walk the header ourselves
 * with bounds checks, then parse it with node-llama-cpp's `readGgufFileInfo`, then check the data
 * section is complete and the architecture's required keys are present.
 */
import fs from "node:fs/promises";
import type {FileHandle} from "node:fs/promises";
import path from "node:path";
import {displayText, maxModelNameLength} from "../../common/displayText.js";
import type {GgufFileInfo} from "node-llama-cpp" with {"resolution-mode": "import"};
import {errorMessage} from "../../common/errorMessage.js";

export type ModelFileErrorCode =
    /** The path does not exist. */
    | "ENOENT"
    /** The path is a directory. */
    | "EISDIR"
    /** Not a regular file, or it cannot be read (permissions, I/O error). */
    | "UNREADABLE"
    /** The file has zero bytes. */
    | "EMPTY"
    /** The file does not start with the GGUF magic. */
    | "NOT_GGUF"
    /** The header or the tensor data ends past the end of the file. */
    | "TRUNCATED"
    /** The header is structurally invalid or required metadata is missing or inconsistent. */
    | "BAD_METADATA";

export class ModelFileError extends Error {
    override readonly name = "ModelFileError";

    constructor(
        readonly code: ModelFileErrorCode,
        message: string,
        readonly path: string,
        options?: {cause?: unknown}
    ) {
        super(message, options);
    }
}

export interface ValidatedModelInfo {
    /** Absolute path of the file. */
    readonly path: string,
    readonly sizeBytes: number,
    readonly ggufVersion: number,
    readonly architecture: string,
    /** `general.name`, or the file name without `.gguf` when absent. */
    readonly name: string,
    /** Training context length (`<arch>.context_length`), if present and plausible (at most {@link maxPlausibleContextLength}). */
    readonly contextLength: number | undefined,
    /** Sum of the element counts of all tensors. */
    readonly parameterCount: number,
    readonly tensorCount: number,
    /** Raw `general.file_type`, if present. */
    readonly fileType: number | undefined,
    /** llama.cpp-style quantization name, e.g. "F16", "Q4_K_M"; inferred from the tensor types when `general.file_type` is absent. */
    readonly quantization: string,
    /** Number of entries of `tokenizer.ggml.tokens`, if present. */
    readonly vocabSize: number | undefined,
    readonly blockCount: number | undefined,
    readonly embeddingLength: number | undefined
}

const GGUF_MAGIC = Buffer.from("GGUF", "ascii");

/**
 * Validates a model file without loading it natively. Resolves with a summary, or rejects with a
 * {@link ModelFileError} for every kind of bad file (never with another error type).
 */
export async function validateModelFile(modelPath: string): Promise<ValidatedModelInfo> {
    const absolute = path.resolve(modelPath);
    try {
        return await validate(absolute);
    } catch (error) {
        if (error instanceof ModelFileError) throw error;
        throw new ModelFileError("UNREADABLE", `Cannot read model file ${absolute}: ${errorMessage(error)}`, absolute, {cause: error});
    }
}

async function validate(file: string): Promise<ValidatedModelInfo> {
    const fail = (code: ModelFileErrorCode, message: string, cause?: unknown): ModelFileError =>
        new ModelFileError(code, message, file, cause === undefined ? undefined : {cause});

    const openFailure = (error: unknown): ModelFileError => {
        const code = errnoCode(error);
        if (code === "ENOENT" || code === "ENOTDIR") return fail("ENOENT", `Model file not found: ${file}`, error);
        if (code === "EISDIR") return fail("EISDIR", `Model path is a directory, not a file: ${file}`, error);
        return fail("UNREADABLE", `Cannot open model file ${file}: ${errorMessage(error)}`, error);
    };
    const pathStat = await fs.stat(file).catch((error: unknown) => {
        throw openFailure(error);
    });
    if (pathStat.isDirectory()) throw fail("EISDIR", `Model path is a directory, not a file: ${file}`);
    if (!pathStat.isFile()) throw fail("UNREADABLE", `Model path is not a regular file: ${file}`);

    let handle: FileHandle;
    try {
        handle = await fs.open(file, "r");
    } catch (error) {
        throw openFailure(error);
    }

    let scan: HeaderScan;
    let sizeBytes: number;
    try {
        const stat = await handle.stat();
        if (stat.isDirectory()) throw fail("EISDIR", `Model path is a directory, not a file: ${file}`);
        if (!stat.isFile()) throw fail("UNREADABLE", `Model path is not a regular file: ${file}`);
        sizeBytes = stat.size;
        if (sizeBytes === 0) throw fail("EMPTY", `Model file is empty: ${file}`);
        const magic = Buffer.alloc(4);
        const {bytesRead} = await handle.read(magic, 0, 4, 0);
        if (bytesRead < 4 || !magic.equals(GGUF_MAGIC)) throw fail("NOT_GGUF", `Not a GGUF file (bad magic): ${file}`);
        scan = await scanHeader(new BoundedReader(handle, sizeBytes), file);
    } catch (error) {
        if (error instanceof ModelFileError) throw error;
        const code = errnoCode(error);
        if (code === "EISDIR") throw fail("EISDIR", `Model path is a directory, not a file: ${file}`, error);
        throw fail("UNREADABLE", `Cannot read model file ${file}: ${errorMessage(error)}`, error);
    } finally {
        await handle.close().catch(() => undefined);
    }

    const expectedBytes = scan.tensors.reduce((max, t) => Math.max(max, scan.dataOffset + t.offset + t.byteLength), scan.headerEnd);
    if (sizeBytes < expectedBytes)
        throw fail("TRUNCATED", `GGUF file is truncated: expected ≥ ${expectedBytes} bytes, file has ${sizeBytes}: ${file}`);

    let info: GgufFileInfo;
    try {
        const {readGgufFileInfo} = await import("node-llama-cpp");
        info = await readGgufFileInfo(file, {logWarnings: false, spliceSplitFiles: false, sourceType: "filesystem"});
    } catch (error) {
        throw fail("BAD_METADATA", `Cannot parse GGUF metadata of ${file}: ${errorMessage(error)}`, error);
    }

    const metadata: unknown = info.metadata;
    const architecture = lookup(metadata, ["general", "architecture"]);
    if (typeof architecture !== "string" || architecture === "")
        throw fail("BAD_METADATA", `GGUF metadata is missing general.architecture: ${file}`);

    const tokens = lookup(metadata, ["tokenizer", "ggml", "tokens"]);
    checkBlockCount(metadata, architecture, scan.tensors, file);
    checkTokenizer(metadata, architecture, file);
    if (architecture === "llama") checkLlamaHyperParameters(metadata, file);

    const fileTypeValue = lookup(metadata, ["general", "file_type"]);
    const fileType = typeof fileTypeValue === "number" ? fileTypeValue : undefined;
    const generalName = lookup(metadata, ["general", "name"]);
    return {
        path: file,
        sizeBytes,
        ggufVersion: scan.version,
        architecture,
        // The one place the name is read: shown in the panel, the status bar, logs and the terminal.
        name: (typeof generalName === "string" ? displayText(generalName, maxModelNameLength) : "")
            || displayText(path.basename(file).replace(/\.gguf$/i, ""), maxModelNameLength),
        contextLength: plausibleContextLength(lookup(metadata, [architecture, "context_length"])),
        parameterCount: scan.tensors.reduce((sum, t) => sum + t.elementCount, 0),
        tensorCount: scan.tensors.length,
        fileType,
        quantization: (fileType !== undefined ? fileTypeNames.get(fileType) : undefined) ?? inferQuantization(scan.tensors),
        vocabSize: Array.isArray(tokens) ? tokens.length : undefined,
        blockCount: positiveInteger(lookup(metadata, [architecture, "block_count"])),
        embeddingLength: positiveInteger(lookup(metadata, [architecture, "embedding_length"]))
    };
}

// ---------------------------------------------------------------------------------------------
// metadata checks

/**
 * Keys (below `llama.`) that llama.cpp needs to build a llama model. Without some of them it does
 * not fail cleanly but can abort the whole process (e.g. a missing `feed_forward_length`).
 * (`attention.head_count_kv` and `rope.dimension_count` are optional there — they default to the
 * head count and the head size — so they are only checked when present.)
 */
const requiredLlamaKeys: readonly (readonly string[])[] = [
    ["context_length"],
    ["embedding_length"],
    ["block_count"],
    ["feed_forward_length"],
    ["attention", "head_count"],
    ["attention", "layer_norm_rms_epsilon"]
];

function checkLlamaHyperParameters(metadata: unknown, file: string): void {
    const get = (...keys: string[]): unknown => lookup(metadata, ["llama", ...keys]);
    const missing = requiredLlamaKeys.filter((keys) => get(...keys) === undefined).map((keys) => `llama.${keys.join(".")}`);
    if (missing.length > 0) throw new ModelFileError("BAD_METADATA", `GGUF metadata is missing required key(s) ${missing.join(", ")}: ${file}`, file);

    const bad = (key: string, value: unknown, why = ""): ModelFileError =>
        new ModelFileError("BAD_METADATA", `GGUF metadata has an invalid llama.${key} (${formatValue(value)})${why}: ${file}`, file);
    for (const key of ["context_length", "embedding_length", "block_count"]) {
        if (positiveInteger(get(key)) === undefined) throw bad(key, get(key));
    }
    // llama.cpp reads these as "key or per-layer array"; every entry must be usable.
    const perLayer = (keys: string[], optional: boolean): number[] | undefined => {
        const value = get(...keys);
        if (value === undefined && optional) return undefined;
        const values = Array.isArray(value) ? value : [value];
        const numbers = values.map(positiveInteger);
        if (numbers.length === 0 || numbers.some((n) => n === undefined)) throw bad(keys.join("."), value);
        return numbers as number[];
    };
    perLayer(["feed_forward_length"], false);
    const heads = perLayer(["attention", "head_count"], false) ?? [];
    const kvHeads = perLayer(["attention", "head_count_kv"], true);
    if (kvHeads !== undefined && kvHeads.some((kv, i) => heads[Math.min(i, heads.length - 1)] % kv !== 0))
        throw bad("attention.head_count_kv", get("attention", "head_count_kv"), " — it must divide llama.attention.head_count");

    const epsilon = get("attention", "layer_norm_rms_epsilon");
    if (typeof epsilon !== "number" || !(epsilon > 0)) throw bad("attention.layer_norm_rms_epsilon", epsilon);

    const embedding = positiveInteger(get("embedding_length")) ?? 0;
    const headSize = positiveInteger(get("attention", "key_length")) ?? embedding / heads[0];
    if (!Number.isInteger(headSize))
        throw bad("embedding_length", embedding, ` — it must be a multiple of llama.attention.head_count (${heads[0]})`);
    const rope = get("rope", "dimension_count");
    if (rope !== undefined && rope !== headSize) throw bad("rope.dimension_count", rope, ` — llama.cpp requires the head size ${headSize}`);
}

/** llama.cpp's LLAMA_MAX_LAYERS: it asserts (aborting the process) that `<arch>.block_count` is in 1..512. */
const maxBlockCount = 512;

/**
 * `<arch>.block_count` must be in llama.cpp's range and match the `blk.N.` tensors: every index
 * below it has tensors and none is at or above it. `<arch>.nextn_predict_layers` (asserted too) may
 * not exceed it.
 */
function checkBlockCount(metadata: unknown, architecture: string, tensors: readonly ScannedTensor[], file: string): void {
    const bad = (message: string): ModelFileError => new ModelFileError("BAD_METADATA", `${message}: ${file}`, file);
    const value = lookup(metadata, [architecture, "block_count"]);
    if (value === undefined) return; // llama.cpp reports a missing key cleanly (llama: checked with the required keys)
    const blockCount = positiveInteger(value);
    if (blockCount === undefined || blockCount > maxBlockCount)
        throw bad(`GGUF metadata has an invalid ${architecture}.block_count (${formatValue(value)}) — llama.cpp supports 1 to ${maxBlockCount} layers`);
    const indices = new Set<number>();
    for (const tensor of tensors) {
        const match = /^blk\.(\d+)\./.exec(tensor.name);
        if (match) indices.add(Number(match[1]));
    }
    if (indices.size > 0) {
        const beyond = [...indices].filter((i) => i >= blockCount).sort((a, b) => a - b);
        if (beyond.length > 0)
            throw bad(`GGUF metadata says ${architecture}.block_count = ${blockCount}, but the file has tensors for layer ${beyond[0]}`);
        const missing = Array.from({length: blockCount}, (_, i) => i).find((i) => !indices.has(i));
        if (missing !== undefined)
            throw bad(`GGUF metadata says ${architecture}.block_count = ${blockCount}, but the file has no tensors for layer ${missing}`);
    }
    const nextn = lookup(metadata, [architecture, "nextn_predict_layers"]);
    if (nextn !== undefined && !(nextn === 0 || (positiveInteger(nextn) ?? Infinity) <= blockCount))
        throw bad(`GGUF metadata has an invalid ${architecture}.nextn_predict_layers (${formatValue(nextn)}) — at most ${architecture}.block_count (${blockCount})`);
}

/** Tokenizer models (`tokenizer.ggml.model`) llama.cpp knows; "none"/"no_vocab" are refused separately. */
const knownTokenizerModels = ["llama", "gpt2", "bert", "t5", "rwkv", "plamo2", "gemma4", "whitespace", "hybriddna"];
/** BPE tokenizer models: llama.cpp needs `tokenizer.ggml.merges` for them. */
const bpeTokenizerModels = ["gpt2", "gemma4", "whitespace", "hybriddna"];
/** `tokenizer.ggml.token_type` of a byte token (llama_token_type LLAMA_TOKEN_TYPE_BYTE). */
const BYTE_TOKEN_TYPE = 6;

/**
 * The vocabulary must suit its tokenizer model: llama.cpp aborts the process (asserts, or C++
 * exceptions it does not catch) on duplicate tokens, on byte tokens in a bert (WordPiece)
 * vocabulary, on a SentencePiece vocabulary that cannot encode every byte, and on an rwkv
 * vocabulary without every single byte; and it cannot tokenize at all without a vocabulary.
 */
function checkTokenizer(metadata: unknown, architecture: string, file: string): void {
    const bad = (message: string): ModelFileError => new ModelFileError("BAD_METADATA", `${message}: ${file}`, file);
    const tokens = lookup(metadata, ["tokenizer", "ggml", "tokens"]);
    const model = lookup(metadata, ["tokenizer", "ggml", "model"]);
    if (model === "none" || model === "no_vocab")
        throw bad(`GGUF model has no vocabulary (tokenizer.ggml.model = ${JSON.stringify(model)}), so it cannot tokenize prompts`);
    if (tokens === undefined) {
        if (architecture === "llama")
            throw bad("GGUF metadata is missing required key tokenizer.ggml.tokens");
        return;
    }
    if (!Array.isArray(tokens) || tokens.length === 0 || tokens.some((t) => typeof t !== "string"))
        throw bad("GGUF metadata has an invalid tokenizer.ggml.tokens (expected a non-empty string array)");
    const texts = tokens as string[];
    for (const key of ["scores", "token_type"]) {
        const values = lookup(metadata, ["tokenizer", "ggml", key]);
        if (values !== undefined && (!Array.isArray(values) || values.length !== texts.length))
            throw bad(`GGUF metadata tokenizer.ggml.${key} has ${Array.isArray(values) ? values.length : "no"} entries, expected ${texts.length}`);
    }
    if (model === undefined) throw bad("GGUF metadata is missing required key tokenizer.ggml.model");
    if (typeof model !== "string" || !knownTokenizerModels.includes(model))
        throw bad(`GGUF metadata has an unknown tokenizer.ggml.model ${typeof model === "string" ? printable(model) : JSON.stringify(model)} (llama.cpp knows ${knownTokenizerModels.join(", ")})`);

    // llama.cpp replaces an empty token by "[EMPTY_<id>]", then asserts that no two tokens are equal.
    const ids = new Map<string, number>();
    for (let i = 0; i < texts.length; i++) {
        const text = texts[i] === "" ? `[EMPTY_${i}]` : texts[i]!;
        const first = ids.get(text);
        if (first !== undefined) throw bad(`GGUF vocabulary has token ${printable(text)} twice (ids ${first} and ${i})`);
        ids.set(text, i);
    }

    const tokenTypes = lookup(metadata, ["tokenizer", "ggml", "token_type"]);
    const types = Array.isArray(tokenTypes) ? tokenTypes : undefined;
    if (model === "bert") {
        const byteToken = types?.indexOf(BYTE_TOKEN_TYPE) ?? -1;
        if (byteToken >= 0)
            throw bad(`GGUF vocabulary has byte token ${byteToken} (${printable(texts[byteToken]!)}), which a bert (WordPiece) tokenizer cannot decode — is tokenizer.ggml.model wrong?`);
    }
    if (bpeTokenizerModels.includes(model) && lookup(metadata, ["tokenizer", "ggml", "pre"]) !== "kimi-k2") {
        const merges = lookup(metadata, ["tokenizer", "ggml", "merges"]);
        if (!Array.isArray(merges) || merges.some((m) => typeof m !== "string"))
            throw bad(`GGUF metadata is missing tokenizer.ggml.merges, which a ${model} (BPE) tokenizer needs`);
    }
    if (model === "rwkv") {
        const singleBytes = new Set(texts.map(rwkvTokenBytes).filter((bytes) => bytes.length === 1).map((bytes) => bytes[0]));
        const missing = Array.from({length: 256}, (_, b) => b).find((b) => !singleBytes.has(b));
        if (missing !== undefined)
            throw bad(`GGUF rwkv vocabulary has no token for the byte 0x${hexByte(missing)}; an rwkv tokenizer needs all 256`);
    }
    if (model !== "llama") return;
    // SentencePiece byte fallback looks tokens up as "<0x%02X>": lower-case byte tokens break it.
    for (let i = 0; i < texts.length; i++) {
        const token = texts[i]!;
        const isByteToken = types !== undefined ? types[i] === BYTE_TOKEN_TYPE : /^<0x[0-9a-f]{2}>$/i.test(token);
        if (isByteToken && !/^<0x[0-9A-F]{2}>$/.test(token))
            throw bad(`GGUF byte token ${i} is ${JSON.stringify(token)}; llama tokenizers need upper-case hex like <0xAB>`);
    }
    // Text that no piece covers falls back to "<0xXX>" byte tokens (or the byte itself as a token): one missing aborts.
    for (let b = 0; b < 256; b++) {
        if (!ids.has(`<0x${hexByte(b)}>`) && !(b < 0x80 && ids.has(String.fromCharCode(b))))
            throw bad(`GGUF llama (SentencePiece) vocabulary has no byte token <0x${hexByte(b)}>; llama.cpp needs all 256 for text outside the vocabulary`);
    }
}

function hexByte(byte: number): string {
    return byte.toString(16).toUpperCase().padStart(2, "0");
}

/** The bytes an rwkv token stands for: llama.cpp unescapes \t, \n, \r, \xHH and \<char>. */
function rwkvTokenBytes(text: string): number[] {
    const bytes = [...Buffer.from(text, "utf8")];
    const out: number[] = [];
    for (let i = 0; i < bytes.length; i++) {
        if (bytes[i] !== 0x5c || i + 1 >= bytes.length) {
            out.push(bytes[i]!);
            continue;
        }
        const next = String.fromCharCode(bytes[++i]!);
        if (next === "x") {
            out.push(parseInt(String.fromCharCode(bytes[i + 1] ?? 0x30, bytes[i + 2] ?? 0x30), 16) & 0xff);
            i += 2;
        } else
            out.push(({t: 9, n: 10, r: 13} as Record<string, number>)[next] ?? bytes[i]!);
    }
    return out;
}

function lookup(root: unknown, keys: readonly string[]): unknown {
    let node = root;
    for (const key of keys) {
        if (node === null || typeof node !== "object" || Array.isArray(node)) return undefined;
        node = (node as Record<string, unknown>)[key];
    }
    return node;
}

/**
 * Context lengths above this are treated as unknown: the longest real models declare about 10M
 * tokens, and llama.cpp reads the key as int32, so e.g. 2^32 − 1 becomes −1 and a 1-token context.
 */
export const maxPlausibleContextLength = 1 << 24;

function plausibleContextLength(value: unknown): number | undefined {
    const n = positiveInteger(value);
    return n !== undefined && n <= maxPlausibleContextLength ? n : undefined;
}

function positiveInteger(value: unknown): number | undefined {
    const n = typeof value === "bigint" ? Number(value) : value;
    return typeof n === "number" && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

// ---------------------------------------------------------------------------------------------
// quantization names

/** `general.file_type` → llama.cpp's short quantization name (llama_ftype). */
const fileTypeNames = new Map<number, string>([
    [0, "F32"], [1, "F16"], [2, "Q4_0"], [3, "Q4_1"], [7, "Q8_0"], [8, "Q5_0"], [9, "Q5_1"],
    [10, "Q2_K"], [11, "Q3_K_S"], [12, "Q3_K_M"], [13, "Q3_K_L"], [14, "Q4_K_S"], [15, "Q4_K_M"],
    [16, "Q5_K_S"], [17, "Q5_K_M"], [18, "Q6_K"], [19, "IQ2_XXS"], [20, "IQ2_XS"], [21, "Q2_K_S"],
    [22, "IQ3_XS"], [23, "IQ3_XXS"], [24, "IQ1_S"], [25, "IQ4_NL"], [26, "IQ3_S"], [27, "IQ3_M"],
    [28, "IQ2_S"], [29, "IQ2_M"], [30, "IQ4_XS"], [31, "IQ1_M"], [32, "BF16"], [36, "TQ1_0"],
    [37, "TQ2_0"], [38, "MXFP4_MOE"], [39, "NVFP4"], [40, "Q1_0"], [41, "Q2_0"]
]);

interface GgmlTypeInfo {
    readonly name: string,
    /** Elements per block. */
    readonly blockSize: number,
    /** Bytes per block. */
    readonly typeSize: number
}

/** ggml tensor types (ggml.c type_traits) this validator can size; others are rejected as unsupported. */
const ggmlTypes = new Map<number, GgmlTypeInfo>(
    (
        [
            [0, "F32", 1, 4], [1, "F16", 1, 2], [2, "Q4_0", 32, 18], [3, "Q4_1", 32, 20], [6, "Q5_0", 32, 22],
            [7, "Q5_1", 32, 24], [8, "Q8_0", 32, 34], [9, "Q8_1", 32, 36], [10, "Q2_K", 256, 84], [11, "Q3_K", 256, 110],
            [12, "Q4_K", 256, 144], [13, "Q5_K", 256, 176], [14, "Q6_K", 256, 210], [15, "Q8_K", 256, 292],
            [16, "IQ2_XXS", 256, 66], [17, "IQ2_XS", 256, 74], [18, "IQ3_XXS", 256, 98], [19, "IQ1_S", 256, 50],
            [20, "IQ4_NL", 32, 18], [21, "IQ3_S", 256, 110], [22, "IQ2_S", 256, 82], [23, "IQ4_XS", 256, 136],
            [24, "I8", 1, 1], [25, "I16", 1, 2], [26, "I32", 1, 4], [27, "I64", 1, 8], [28, "F64", 1, 8],
            [29, "IQ1_M", 256, 56], [30, "BF16", 1, 2], [34, "TQ1_0", 256, 54], [35, "TQ2_0", 256, 66],
            [39, "MXFP4", 32, 17], [40, "NVFP4", 64, 36], [41, "Q1_0", 128, 18], [42, "Q2_0", 64, 18]
        ] as const
    ).map(([id, name, blockSize, typeSize]) => [id, {name, blockSize, typeSize}])
);

/** Without `general.file_type`: the type holding the most elements among the matrices (or all tensors). */
function inferQuantization(tensors: readonly ScannedTensor[]): string {
    const matrices = tensors.filter((t) => t.dims.length >= 2);
    const totals = new Map<string, number>();
    for (const t of matrices.length > 0 ? matrices : tensors) totals.set(t.typeName, (totals.get(t.typeName) ?? 0) + t.elementCount);
    let best = "unknown";
    let bestCount = -1;
    for (const [name, count] of totals) {
        if (count > bestCount) [best, bestCount] = [name, count];
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// bounded header scan

interface ScannedTensor {
    readonly name: string,
    readonly dims: readonly number[],
    readonly typeName: string,
    readonly elementCount: number,
    /** Relative to the data section. */
    readonly offset: number,
    readonly byteLength: number
}

interface HeaderScan {
    readonly version: number,
    /** End of the tensor infos (before alignment padding). */
    readonly headerEnd: number,
    readonly dataOffset: number,
    readonly tensors: readonly ScannedTensor[]
}

class TruncatedHeader extends Error {
    constructor(readonly needed: number) {
        super(`header needs ${needed} bytes`);
    }
}

/** Sequential reader over a file that never reads past `size` (it throws {@link TruncatedHeader} instead). */
class BoundedReader {
    private window = Buffer.alloc(0);
    private windowStart = 0;
    position = 0;

    constructor(
        private readonly handle: FileHandle,
        readonly size: number
    ) {}

    get remaining(): number {
        return this.size - this.position;
    }

    /** Makes `n` bytes at the current position available in the window. */
    async need(n: number): Promise<void> {
        const end = this.position + n;
        if (end > this.size) throw new TruncatedHeader(end);
        if (this.position >= this.windowStart && end <= this.windowStart + this.window.length) return;
        const length = Math.min(Math.max(n, 1 << 20), this.size - this.position);
        const buffer = Buffer.alloc(length);
        let filled = 0;
        while (filled < length) {
            const {bytesRead} = await this.handle.read(buffer, filled, length - filled, this.position + filled);
            if (bytesRead === 0) throw new TruncatedHeader(end); // file shrank while reading
            filled += bytesRead;
        }
        this.window = buffer;
        this.windowStart = this.position;
    }

    private at(n: number): number {
        const offset = this.position - this.windowStart;
        this.position += n;
        return offset;
    }

    async u32(): Promise<number> {
        await this.need(4);
        return this.window.readUInt32LE(this.at(4));
    }

    async u64(): Promise<number> {
        await this.need(8);
        const value = this.window.readBigUInt64LE(this.at(8));
        // Anything beyond 2^53 cannot be a real count/offset/length in a file of this size.
        return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
    }

    /** Reads a length-prefixed UTF-8 string; `undefined` when it is longer than `maxLength` bytes. */
    async string(maxLength: number): Promise<string | undefined> {
        const length = await this.u64();
        if (length > this.remaining) throw new TruncatedHeader(this.position + length);
        if (length > maxLength) return undefined;
        await this.need(length);
        const start = this.at(length);
        return this.window.toString("utf8", start, start + length);
    }

    skip(n: number): void {
        if (n > this.remaining) throw new TruncatedHeader(this.position + n);
        this.position += n;
    }
}

/** Byte sizes of the fixed-size GGUF value types (gguf.h `enum gguf_type`). */
const fixedValueSizes = new Map<number, number>([
    [0, 1], [1, 1], [2, 2], [3, 2], [4, 4], [5, 4], [6, 4], [7, 1], [10, 8], [11, 8], [12, 8]
]);
const GGUF_TYPE_STRING = 8;
/** Generous caps (ggml itself limits tensor names to 63 bytes) so a corrupt length cannot allocate gigabytes. */
const MAX_KEY_BYTES = 64 * 1024;
const MAX_TENSOR_NAME_BYTES = 64 * 1024;
const GGUF_TYPE_ARRAY = 9;

async function scanHeader(reader: BoundedReader, file: string): Promise<HeaderScan> {
    const bad = (message: string): ModelFileError => new ModelFileError("BAD_METADATA", `Invalid GGUF header (${message}): ${file}`, file);
    try {
        reader.position = 4; // after the magic
        const version = await reader.u32();
        if (version !== 2 && version !== 3) throw bad(`unsupported GGUF version ${version}`);
        const tensorCount = await reader.u64();
        const kvCount = await reader.u64();
        // A KV pair takes ≥ 13 bytes (key length, type, value) and a tensor info ≥ 32; bigger counts cannot fit.
        const minimumRest = kvCount * 13 + tensorCount * 32;
        if (minimumRest > reader.remaining) throw new TruncatedHeader(reader.position + minimumRest);

        let alignment = 32;
        for (let i = 0; i < kvCount; i++) {
            const key = await reader.string(MAX_KEY_BYTES);
            if (key === undefined) throw bad(`metadata key ${i} is longer than ${MAX_KEY_BYTES} bytes`);
            const type = await reader.u32();
            if (key === "general.alignment") {
                if (type !== 4) throw bad("general.alignment must be a uint32");
                alignment = await reader.u32();
                if (alignment === 0 || (alignment & (alignment - 1)) !== 0) throw bad(`general.alignment ${alignment} is not a power of two`);
                continue;
            }
            await skipValue(reader, type, printable(key), bad);
        }

        const tensors: ScannedTensor[] = [];
        for (let i = 0; i < tensorCount; i++) {
            const name = await reader.string(MAX_TENSOR_NAME_BYTES);
            if (name === undefined) throw bad(`tensor ${i} has a name longer than ${MAX_TENSOR_NAME_BYTES} bytes`);
            const nDims = await reader.u32();
            const label = printable(name);
            if (nDims < 1 || nDims > 4) throw bad(`tensor ${label} has ${nDims} dimensions`);
            const dims: number[] = [];
            for (let d = 0; d < nDims; d++) dims.push(await reader.u64());
            const typeId = await reader.u32();
            const offset = await reader.u64();
            const type = ggmlTypes.get(typeId);
            if (!type) throw bad(`tensor ${label} has unsupported ggml type ${typeId}`);
            if (dims.some((d) => d <= 0)) throw bad(`tensor ${label} has an empty dimension`);
            const elementCount = dims.reduce((p, d) => p * d, 1);
            if (!Number.isSafeInteger(elementCount * 8)) throw bad(`tensor ${label} is too large`);
            if (dims[0] % type.blockSize !== 0) throw bad(`tensor ${label} row size ${dims[0]} is not a multiple of the ${type.name} block size`);
            if (offset % alignment !== 0) throw bad(`tensor ${label} data offset ${offset} is not aligned to ${alignment}`);
            tensors.push({
                name, dims, typeName: type.name, elementCount, offset,
                byteLength: (elementCount / type.blockSize) * type.typeSize
            });
        }
        const headerEnd = reader.position;
        return {version, headerEnd, dataOffset: Math.ceil(headerEnd / alignment) * alignment, tensors};
    } catch (error) {
        if (error instanceof TruncatedHeader)
            throw new ModelFileError(
                "TRUNCATED",
                `GGUF file is truncated: expected ≥ ${error.needed} bytes, file has ${reader.size} (its header runs past the end of the file): ${file}`,
                file
            );
        throw error;
    }
}

async function skipValue(reader: BoundedReader, type: number, key: string, bad: (message: string) => ModelFileError): Promise<void> {
    const fixed = fixedValueSizes.get(type);
    if (fixed !== undefined) return reader.skip(fixed);
    if (type === GGUF_TYPE_STRING) {
        reader.skip(await reader.u64());
        return;
    }
    if (type !== GGUF_TYPE_ARRAY) throw bad(`metadata ${key} has unknown value type ${type}`);
    const elementType = await reader.u32();
    const count = await reader.u64();
    const elementSize = fixedValueSizes.get(elementType);
    if (elementSize !== undefined) return reader.skip(count * elementSize);
    if (elementType !== GGUF_TYPE_STRING) throw bad(`metadata ${key} is an array of unsupported type ${elementType}`);
    if (count * 8 > reader.remaining) throw new TruncatedHeader(reader.position + count * 8);
    for (let i = 0; i < count; i++) reader.skip(await reader.u64());
}

// ---------------------------------------------------------------------------------------------

function errnoCode(error: unknown): string | undefined {
    if (error === null || typeof error !== "object" || !("code" in error)) return undefined;
    const {code} = error;
    return typeof code === "string" ? code : undefined;
}

/** A key or tensor name made safe for an error message (control bytes escaped, length capped). */
function printable(text: string): string {
    const json = JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
    return /^"[\x20-\x7e]*"$/.test(json) && !text.includes(" ") ? text : json;
}

function formatValue(value: unknown): string {
    return Array.isArray(value) ? `[${value.slice(0, 8).join(", ")}${value.length > 8 ? ", …" : ""}]` : String(value);
}
