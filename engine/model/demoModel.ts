/**
 * The built-in demo model: a deterministic, randomly initialised llama-architecture GGUF.
 *
 * It produces gibberish, but it is a real model for llama.cpp — real tensor shapes, a real
 * SentencePiece-style vocabulary — so it exercises the whole serving path (load, tokenize,
 * prefill, decode, KV cache) at a known, reproducible cost without downloading anything.
 * The same options always yield a byte-identical file. The weights are drawn once, in float32, and
 * stored as F32, F16, or quantized to Q8_0 / Q4_0 the way llama.cpp quantizes a model.
 */
import {randomBytes} from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {computeGgufLayout, elementCountOf, writeGguf, type GgufMetadataEntry, type GgufTensorSpec, type GgufTensorType} from "./ggufWriter.js";
import {Xoshiro128} from "../../common/seededRandom.js";

import type {DemoModelSize} from "../../protocol/engineOptions.js";

export type {DemoModelSize};
/** Storage type of the weight matrices; the quantized ones are the formats people download. */
export const demoModelDtypes = ["f16", "f32", "q8_0", "q4_0"] as const;
export type DemoModelDtype = typeof demoModelDtypes[number];

/**
 * `general.file_type` (llama.cpp's `enum llama_ftype`: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_0) and the
 * on-disk type of the weight matrices. As llama-quantize does, the Q4_0 file keeps `output.weight` at higher
 * precision (llama.cpp picks Q6_K; this writer's best is Q8_0); norms always stay F32.
 */
const dtypeEncodings: Record<DemoModelDtype, {fileType: number, matrices: GgufTensorType, output: GgufTensorType}> = {
    f32: {fileType: 0, matrices: "F32", output: "F32"},
    f16: {fileType: 1, matrices: "F16", output: "F16"},
    q8_0: {fileType: 7, matrices: "Q8_0", output: "Q8_0"},
    q4_0: {fileType: 2, matrices: "Q4_0", output: "Q8_0"}
};

/**
 * A small Llama-2-style chat template written for the demo model: its markers (`[INST]`, `[/INST]`,
 * `<<SYS>>`) are plain text, and it brackets turns with `<s>` / `</s>`, which are in the demo vocabulary.
 */
export const demoChatTemplates = {
    /**
     * ChatML with tools: offered in the system message as JSON lines, calls written as JSON inside
     * <tool_call> tags and results inside <tool_response> tags (the style of many open models' templates),
     * so a demo model can show tool calling in a template's own syntax.
     */
    chatmlTools:
        "{%- if tools %}<|im_start|>system\n" +
        "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}" +
        "You may call functions. Their signatures, one JSON object per line, inside <tools></tools>:\n<tools>\n" +
        "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n" +
        "To call one, answer with <tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call><|im_end|>\n" +
        "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}" +
        "{%- for message in messages %}" +
        "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n" +
        "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{% if message.content %}{{ message.content }}{% endif %}" +
        "{%- if message.tool_calls %}{%- for call in message.tool_calls %}\n<tool_call>\n" +
        "{\"name\": \"{{ call.function.name }}\", \"arguments\": {{ call.function.arguments | tojson }}}\n</tool_call>" +
        "{%- endfor %}{% endif %}<|im_end|>\n" +
        "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n" +
        "{% endif %}{%- endfor %}" +
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    /**
     * A reasoning model's template in the style of DeepSeek-R1's: every answer starts inside `<think>`, an assistant
     * message's `reasoning_content` is rendered before its content. Its markers `<think>` and `</think>` are single
     * (user-defined) tokens of the model that stores it, as in reasoning models' vocabularies.
     */
    thinking:
        "{%- for message in messages -%}" +
        "{%- if message.role == 'system' -%}<|system|>\n{{ message.content }}<|end|>\n" +
        "{% elif message.role == 'user' -%}<|user|>\n{{ message.content }}<|end|>\n" +
        "{% elif message.role == 'assistant' -%}<|assistant|>\n" +
        "{% if message.reasoning_content -%}<think>\n{{ message.reasoning_content }}\n</think>\n\n{% endif -%}" +
        "{{ message.content }}<|end|>\n" +
        "{% endif -%}{%- endfor -%}" +
        "{%- if add_generation_prompt -%}<|assistant|>\n<think>\n{% endif -%}",
    llama2:
        "{% for message in messages %}" +
        "{% if message['role'] == 'system' %}{{ bos_token }}<<SYS>>\n{{ message['content'] }}\n<</SYS>>\n\n" +
        "{% elif message['role'] == 'user' %}{% if loop.first %}{{ bos_token }}{% endif %}[INST] {{ message['content'] }} [/INST]" +
        "{% else %} {{ message['content'] }} {{ eos_token }}{{ bos_token }}{% endif %}" +
        "{% endfor %}"
} as const;
export type DemoChatTemplateName = keyof typeof demoChatTemplates;

/**
 * Bump whenever the generated bytes change for a given (size, seed, dtype): it is part of the
 * cache file name, so stale cached models are regenerated instead of reused.
 */
export const DEMO_MODEL_GENERATOR_VERSION = 1;

/** Llama hyper-parameters of one demo size. */
export interface DemoModelShape {
    readonly embeddingLength: number,
    readonly blockCount: number,
    readonly feedForwardLength: number,
    readonly headCount: number,
    readonly headCountKv: number,
    readonly contextLength: number
}

export interface DemoModelSizeInfo {
    readonly shape: DemoModelShape,
    readonly vocabSize: number,
    /** Exact number of parameters (sum of all tensor element counts). */
    readonly parameterCount: number,
    /** One-line human description, e.g. for `--help`. */
    readonly description: string
}

// ---------------------------------------------------------------------------------------------
// vocabulary

const enum TokenType {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Byte = 6
}

/** Reasoning models' markers: a chat template that writes them gets them as single tokens (see `thinking`). */
const reasoningMarkers = ["<think>", "</think>"];

/** The tokens a model storing `chatTemplate` adds to the demo vocabulary: the reasoning markers it writes. */
export function demoAddedTokens(chatTemplate: string | undefined): string[] {
    return chatTemplate === undefined ? [] : reasoningMarkers.filter((marker) => chatTemplate.includes(marker));
}

const SPACE = "\u2581"; // "▁", SentencePiece's word-boundary marker

/** Common English words, most frequent first; each becomes a `▁word` token (plus its prefixes). */
const COMMON_WORDS = (
    "the of and to a in is it you that he was for on are as with his they I at be this have from or one had by word " +
    "but not what all were we when your can said there use an each which she do how their if will up other about out " +
    "many then them these so some her would make like him into time has look two more write go see number no way could " +
    "people my than first water been call who oil its now find long down day did get come made may part once upon " +
    "little big small good new old great high every near add food between own below country plant last school father " +
    "keep tree never start city earth eye light thought head under story saw left don few while along might close " +
    "something seem next hard open example begin life always those both paper together got group often run important " +
    "until children side feet car mile night walk white sea began grow took river four carry state book hear stop " +
    "without second later miss idea enough eat face watch far Indian really almost let above girl sometimes mountain " +
    "cut young talk soon list song being leave family it's model token cache memory server request stream fast slow " +
    "The Once There She He They It In One Then"
).split(" ");

/** Frequent word pieces (without a space marker) so that unknown words split into more than single letters. */
const COMMON_PIECES = ["ing", "ed", "er", "es", "ly", "tion", "ment", "ness", "est", "al", "re", "un", "th", "he", "in", "an", "on", "at", "en", "nd", "ou", "st"];

export interface DemoVocabulary {
    readonly tokens: readonly string[],
    readonly scores: Float32Array,
    readonly tokenTypes: Int32Array,
    readonly unkId: number,
    readonly bosId: number,
    readonly eosId: number
}

function byteToken(byte: number): string {
    return `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`;
}

/**
 * Builds the SentencePiece-style ("llama") vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte-fallback
 * tokens `<0x00>`..`<0xFF>`, then normal pieces ordered by priority. Every merged piece's prefixes
 * are in the vocabulary too, so llama.cpp's bigram merging can reach whole words. `added`: user-defined tokens
 * at the end (llama.cpp matches them in text as whole tokens).
 */
export function buildDemoVocabulary(added: readonly string[] = []): DemoVocabulary {
    const special = ["<unk>", "<s>", "</s>"];
    const bytes = Array.from({length: 256}, (_, b) => byteToken(b));
    const normal = new Set<string>([SPACE]);
    for (let c = 0x21; c <= 0x7e; c++) normal.add(String.fromCharCode(c));
    for (let c = 0x21; c <= 0x7e; c++) {
        const ch = String.fromCharCode(c);
        if (/[A-Za-z0-9]/.test(ch)) normal.add(SPACE + ch);
    }
    for (const piece of COMMON_PIECES)
        for (let end = 2; end <= piece.length; end++) normal.add(piece.slice(0, end));
    for (const word of COMMON_WORDS) {
        const marked = SPACE + word;
        for (let end = 2; end <= marked.length; end++) normal.add(marked.slice(0, end));
    }

    const tokens = [...special, ...bytes, ...normal, ...added];
    const scores = new Float32Array(tokens.length);
    const tokenTypes = new Int32Array(tokens.length);
    tokenTypes.set([TokenType.Unknown, TokenType.Control, TokenType.Control], 0);
    tokenTypes.fill(TokenType.Byte, special.length, special.length + bytes.length);
    const firstNormal = special.length + bytes.length;
    const firstAdded = tokens.length - added.length;
    for (let i = firstNormal; i < firstAdded; i++) {
        tokenTypes[i] = TokenType.Normal;
        scores[i] = -(i - firstNormal); // earlier pieces merge first
    }
    tokenTypes.fill(TokenType.UserDefined, firstAdded);
    return {tokens, scores, tokenTypes, unkId: 0, bosId: 1, eosId: 2};
}

const baseVocabulary = buildDemoVocabulary();
/** `<unk>`, `<s>`, `</s>` are the first token ids. */
const CONTROL_TOKEN_COUNT = 3;
/** The byte-fallback tokens `<0x00>`…`<0xFF>` come right after them. */
const BYTE_TOKEN_COUNT = 256;

/** The first token ids whose output rows are zero, so practically never sampled: the control tokens, and with `textOnly` the bytes. */
export function demoNeverSampledTokens(textOnly: boolean): number {
    return CONTROL_TOKEN_COUNT + (textOnly ? BYTE_TOKEN_COUNT : 0);
}

// ---------------------------------------------------------------------------------------------
// sizes

const shapes: Record<DemoModelSize, DemoModelShape> = {
    tiny: {embeddingLength: 128, blockCount: 4, feedForwardLength: 352, headCount: 4, headCountKv: 2, contextLength: 4096},
    small: {embeddingLength: 384, blockCount: 12, feedForwardLength: 1024, headCount: 6, headCountKv: 3, contextLength: 4096},
    medium: {embeddingLength: 768, blockCount: 15, feedForwardLength: 2048, headCount: 12, headCountKv: 6, contextLength: 4096}
};

interface TensorShape {
    readonly name: string,
    readonly dims: readonly number[],
    /** Norm weights: constant 1.0, always F32. */
    readonly isNorm: boolean
}

/** All tensors of a llama model in file order, dims in ggml order (input dimension first). */
function tensorShapes(shape: DemoModelShape, vocabSize: number): TensorShape[] {
    const e = shape.embeddingLength;
    const headDim = e / shape.headCount;
    const kvDim = headDim * shape.headCountKv;
    const ff = shape.feedForwardLength;
    const list: TensorShape[] = [{name: "token_embd.weight", dims: [e, vocabSize], isNorm: false}];
    for (let b = 0; b < shape.blockCount; b++) {
        const p = `blk.${b}.`;
        list.push(
            {name: `${p}attn_norm.weight`, dims: [e], isNorm: true},
            {name: `${p}attn_q.weight`, dims: [e, e], isNorm: false},
            {name: `${p}attn_k.weight`, dims: [e, kvDim], isNorm: false},
            {name: `${p}attn_v.weight`, dims: [e, kvDim], isNorm: false},
            {name: `${p}attn_output.weight`, dims: [e, e], isNorm: false},
            {name: `${p}ffn_norm.weight`, dims: [e], isNorm: true},
            {name: `${p}ffn_gate.weight`, dims: [e, ff], isNorm: false},
            {name: `${p}ffn_up.weight`, dims: [e, ff], isNorm: false},
            {name: `${p}ffn_down.weight`, dims: [ff, e], isNorm: false}
        );
    }
    list.push({name: "output_norm.weight", dims: [e], isNorm: true}, {name: "output.weight", dims: [e, vocabSize], isNorm: false});
    return list;
}

function describe(size: DemoModelSize): DemoModelSizeInfo {
    const shape = shapes[size];
    const vocabSize = baseVocabulary.tokens.length;
    const parameterCount = tensorShapes(shape, vocabSize).reduce((sum, t) => sum + elementCountOf(t.dims), 0);
    const millions = parameterCount >= 10e6 ? Math.round(parameterCount / 1e6).toString() : (parameterCount / 1e6).toFixed(1);
    const description =
        `${size}: ~${millions}M params — ${shape.blockCount} layers, embedding ${shape.embeddingLength}, ` +
        `FFN ${shape.feedForwardLength}, ${shape.headCount} heads (${shape.headCountKv} KV), vocab ${vocabSize}, context ${shape.contextLength}`;
    return {shape, vocabSize, parameterCount, description};
}

/** Shapes and exact parameter counts of the demo sizes (for docs and `--help`). */
export const demoModelSizes: Readonly<Record<DemoModelSize, DemoModelSizeInfo>> = {
    tiny: describe("tiny"),
    small: describe("small"),
    medium: describe("medium")
};

/** The demo sizes by name, smallest first (for flags that take one). */
export const demoModelSizeNames = Object.keys(demoModelSizes) as readonly DemoModelSize[];

export function isDemoModelSize(value: string): value is DemoModelSize {
    return Object.prototype.hasOwnProperty.call(demoModelSizes, value);
}

// ---------------------------------------------------------------------------------------------
// deterministic random numbers

/** 32-bit FNV-1a hash of a string. */
function fnv1a(text: string): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    return h >>> 0;
}

/**
 * Source of uniform values with standard deviation `std` (range ±std·√3), seeded from the model
 * seed and the tensor name so each tensor's values are independent of generation order.
 */
function uniformSource(seed: number, tensorName: string, std: number, zeroPrefix = 0): () => (out: Float32Array) => void {
    return () => {
        const rng = new Xoshiro128(fnv1a(`${seed}:${tensorName}`));
        const scale = (2 * Math.sqrt(3) * std) / 0x1000000;
        const offset = Math.sqrt(3) * std;
        let produced = 0;
        return (out) => {
            for (let i = 0; i < out.length; i++) out[i] = (rng.nextUint32() >>> 8) * scale - offset;
            if (produced < zeroPrefix) out.fill(0, 0, Math.min(out.length, zeroPrefix - produced));
            produced += out.length;
        };
    };
}

const onesSource = (): ((out: Float32Array) => void) => (out) => void out.fill(1);

// ---------------------------------------------------------------------------------------------
// GGUF spec

/** Options for {@link demoModelGgufSpec} and {@link writeDemoModel}. */
export interface DemoModelOptions {
    /** Model size. Default `"small"`. */
    readonly size?: DemoModelSize,
    /** Non-negative safe integer seed for the weights. Default 0. */
    readonly seed?: number,
    /** Storage type of the weight matrices (norm weights are always F32). Default `"f16"`. */
    readonly dtype?: DemoModelDtype,
    /**
     * A Jinja chat template stored as `tokenizer.chat_template`, so chat requests go through
     * node-llama-cpp's template support as they do for downloaded models. Default: none (the engine's
     * plain-text fallback).
     */
    readonly chatTemplate?: string,
    /**
     * Generation emits whole words only: the 256 byte-fallback tokens get zero output rows too, so their
     * logit is always 0 and top-k sampling never picks them. Their random bytes are rarely valid UTF-8,
     * and llama.cpp's server fails a completion whose text is not (benchmarks against it use this
     * variant on every side). Prompts still tokenize as before. Default false.
     */
    readonly textOnly?: boolean,
    /**
     * The context length the model declares (`llama.context_length`, which the engine does not exceed), for
     * prompts longer than the default 4096 tokens (an agent's instructions and tools). Only metadata: the weights
     * are the same. A power of two from 256 to 131072.
     */
    readonly contextLength?: number,
    /**
     * Fill-in-the-middle tokens (`<|fim_prefix|>`, `<|fim_suffix|>`, `<|fim_middle|>`, as Qwen2.5-Coder's; named in
     * `tokenizer.ggml.fim_*_token_id`), so a completion's `suffix` works as on a code model. `"repo"`: also Qwen2.5-Coder's
     * repository-level tokens, `<|repo_name|>` (found by its text, as llama.cpp finds it in GGUFs that do not name it) and
     * `<|file_sep|>` (named in `tokenizer.ggml.fim_sep_token_id`), so `/infill` puts other files in the repo-level
     * pattern. Default false.
     */
    readonly fillInMiddle?: boolean | "repo"
}

/** A fill-in-the-middle model's tokens, in the order prefix, suffix, middle. */
export const demoFimTokens = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"] as const;
/** A repository-level fill-in-the-middle model's repository and file-separator tokens. */
export const demoFimRepoTokens = ["<|repo_name|>", "<|file_sep|>"] as const;

type ResolvedOptions = Required<Omit<DemoModelOptions, "chatTemplate">> & {chatTemplate: string | undefined};

export const defaultDemoContextLength = 4096;

export interface DemoModelGgufSpec {
    readonly metadata: GgufMetadataEntry[],
    readonly tensors: GgufTensorSpec[]
}

function resolveOptions(opts: DemoModelOptions): ResolvedOptions {
    const size = opts.size ?? "small";
    const seed = opts.seed ?? 0;
    const dtype = opts.dtype ?? "f16";
    if (!isDemoModelSize(size)) throw new RangeError(`Unknown demo model size: ${String(size)}`);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Demo model seed must be a non-negative integer, got ${seed}`);
    if (!(demoModelDtypes as readonly string[]).includes(dtype)) throw new RangeError(`Unknown demo model dtype: ${String(dtype)}`);
    const contextLength = opts.contextLength ?? defaultDemoContextLength;
    const powerOfTwo = (contextLength & (contextLength - 1)) === 0;
    if (!Number.isSafeInteger(contextLength) || contextLength < 256 || contextLength > 131072 || !powerOfTwo)
        throw new RangeError(`Demo model context length must be a power of two from 256 to 131072, got ${contextLength}`);
    return {size, seed, dtype, chatTemplate: opts.chatTemplate, textOnly: opts.textOnly ?? false, contextLength,
        fillInMiddle: opts.fillInMiddle ?? false};
}

/** Metadata and tensor sources of a demo model (exposed so tests can write deliberately broken variants). */
export function demoModelGgufSpec(opts: DemoModelOptions = {}): DemoModelGgufSpec {
    const {size, seed, dtype, chatTemplate, textOnly, contextLength, fillInMiddle} = resolveOptions(opts);
    const shape = {...demoModelSizes[size].shape, contextLength};
    const added = [...demoAddedTokens(chatTemplate), ...fillInMiddle !== false ? demoFimTokens : [],
        ...fillInMiddle === "repo" ? demoFimRepoTokens : []];
    const vocabulary = added.length === 0 ? baseVocabulary : buildDemoVocabulary(added);
    const headDim = shape.embeddingLength / shape.headCount;
    const u32 = (value: number) => ({type: "uint32", value}) as const;

    const metadata: GgufMetadataEntry[] = [
        {key: "general.architecture", value: {type: "string", value: "llama"}},
        {key: "general.name", value: {type: "string", value: `Inference Monitor demo ${size} (seed ${seed})`}},
        {key: "general.file_type", value: u32(dtypeEncodings[dtype].fileType)},
        {key: "llama.context_length", value: u32(shape.contextLength)},
        {key: "llama.embedding_length", value: u32(shape.embeddingLength)},
        {key: "llama.block_count", value: u32(shape.blockCount)},
        {key: "llama.feed_forward_length", value: u32(shape.feedForwardLength)},
        {key: "llama.attention.head_count", value: u32(shape.headCount)},
        {key: "llama.attention.head_count_kv", value: u32(shape.headCountKv)},
        {key: "llama.attention.layer_norm_rms_epsilon", value: {type: "float32", value: 1e-5}},
        {key: "llama.rope.dimension_count", value: u32(headDim)},
        {key: "llama.rope.freq_base", value: {type: "float32", value: 10000}},
        {key: "llama.vocab_size", value: u32(vocabulary.tokens.length)},
        {key: "tokenizer.ggml.model", value: {type: "string", value: "llama"}},
        {key: "tokenizer.ggml.tokens", value: {type: "stringArray", value: vocabulary.tokens}},
        {key: "tokenizer.ggml.scores", value: {type: "float32Array", value: vocabulary.scores}},
        {key: "tokenizer.ggml.token_type", value: {type: "int32Array", value: vocabulary.tokenTypes}},
        {key: "tokenizer.ggml.unknown_token_id", value: u32(vocabulary.unkId)},
        {key: "tokenizer.ggml.bos_token_id", value: u32(vocabulary.bosId)},
        {key: "tokenizer.ggml.eos_token_id", value: u32(vocabulary.eosId)},
        {key: "tokenizer.ggml.add_bos_token", value: {type: "bool", value: true}},
        {key: "tokenizer.ggml.add_eos_token", value: {type: "bool", value: false}},
        ...chatTemplate === undefined ? [] : [{key: "tokenizer.chat_template", value: {type: "string", value: chatTemplate}} as const],
        ...fillInMiddle === false ? [] : (["pre", "suf", "mid"] as const).map((part, i) =>
            ({key: `tokenizer.ggml.fim_${part}_token_id`, value: u32(vocabulary.tokens.indexOf(demoFimTokens[i]!))})),
        ...fillInMiddle !== "repo" ? [] : [{key: "tokenizer.ggml.fim_sep_token_id", value: u32(vocabulary.tokens.indexOf(demoFimRepoTokens[1]))}]
    ];

    const encoding = dtypeEncodings[dtype];
    const tensors = tensorShapes(shape, vocabulary.tokens.length).map((t): GgufTensorSpec => {
        if (t.isNorm) return {name: t.name, dims: t.dims, type: "F32", createSource: onesSource};
        // token_embd feeds an RMS norm, so unit variance; matrices use std 1/sqrt(fan_in) (fan_in = dims[0]).
        const std = t.name === "token_embd.weight" ? 1 : 1 / Math.sqrt(t.dims[0]);
        // Zero output rows for <unk>, <s>, </s>: their logit is always 0 while the others are ~N(0, 1), so
        // top-k / greedy decoding practically never ends a request early and lengths stay predictable.
        // With textOnly, the byte-fallback tokens (the next 256 ids) too.
        const zeroRows = demoNeverSampledTokens(textOnly);
        const zeroPrefix = t.name === "output.weight" ? zeroRows * shape.embeddingLength : 0;
        const type = t.name === "output.weight" ? encoding.output : encoding.matrices;
        return {name: t.name, dims: t.dims, type, createSource: uniformSource(seed, t.name, std, zeroPrefix)};
    });
    return {metadata, tensors};
}

/** Exact byte size of the demo model file for these options (without generating it). */
export function demoModelFileSize(opts: DemoModelOptions = {}): number {
    const {metadata, tensors} = demoModelGgufSpec(opts);
    return computeGgufLayout(metadata, tensors).totalBytes;
}

// ---------------------------------------------------------------------------------------------
// writing and caching

/** `error`'s code and message, e.g. "ENOENT: no such file or directory" (without the path Node appends). */
function reasonOf(error: unknown): string {
    if (!(error instanceof Error))
        return String(error);
    const {code} = error as NodeJS.ErrnoException;
    return code === undefined ? error.message : error.message.replace(/, \w+ '.*'$/, "");
}

/**
 * `mkdir -p` that fails instead of looping: Node's recursive mkdir retries forever where creating a
 * directory fails with ENOENT although its parent exists (e.g. anything under /proc).
 */
async function makeDirectories(dir: string): Promise<void> {
    const missing: string[] = [];
    let existing = dir;
    for (;;) {
        const stat = await fs.stat(existing).catch((error: NodeJS.ErrnoException) => {
            if (error.code === "ENOENT")
                return undefined;
            throw new Error(`cannot use directory ${existing}: ${reasonOf(error)}`, {cause: error});
        });
        if (stat !== undefined) {
            if (!stat.isDirectory())
                throw new Error(`${existing} is not a directory`);
            break;
        }
        missing.unshift(existing);
        existing = path.dirname(existing);
    }
    for (const level of missing) {
        await fs.mkdir(level).catch((error: NodeJS.ErrnoException) => {
            if (error.code !== "EEXIST")
                throw new Error(`cannot create directory ${level}: ${reasonOf(error)}`, {cause: error});
        });
    }
}

/**
 * Generates the demo model into `file` atomically: it is written to a unique temporary sibling,
 * fsynced and renamed, so `file` never holds a partial model. Parent directories are created.
 * Failures name the directory or file and the reason.
 */
export async function writeDemoModel(file: string, opts: DemoModelOptions = {}): Promise<void> {
    const {metadata, tensors} = demoModelGgufSpec(opts);
    const target = path.resolve(file);
    await makeDirectories(path.dirname(target));
    const tmp = `${target}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
    try {
        const handle = await fs.open(tmp, "wx").catch((error: unknown) => {
            throw new Error(`cannot create a file in ${path.dirname(target)}: ${reasonOf(error)}`, {cause: error});
        });
        try {
            await writeGguf(handle, metadata, tensors);
            await handle.sync();
        } finally {
            await handle.close();
        }
        await fs.rename(tmp, target);
    } catch (error) {
        await fs.rm(tmp, {force: true}).catch(() => undefined);
        throw error;
    }
    await syncDirectory(path.dirname(target));
}

/** Best effort: persist the rename itself (not possible on every platform, e.g. Windows). */
async function syncDirectory(dir: string): Promise<void> {
    try {
        const handle = await fs.open(dir, "r");
        try {
            await handle.sync();
        } finally {
            await handle.close();
        }
    } catch {
        // ignore: durability of the directory entry is an optimisation, not a correctness requirement
    }
}

/** Options for {@link ensureDemoModel}. */
export interface EnsureDemoModelOptions extends DemoModelOptions {
    /**
     * Directory of the model cache. Default:
     * `$INFERENCE_MONITOR_CACHE_DIR/models`, or `~/.cache/inference-monitor/models` when the variable is unset.
     */
    readonly cacheDir?: string
}

export function defaultDemoModelCacheDir(): string {
    return path.join(process.env.INFERENCE_MONITOR_CACHE_DIR ?? path.join(os.homedir(), ".cache", "inference-monitor"), "models");
}

/** Cache file name; encodes everything that determines the bytes. */
export function demoModelFileName(opts: DemoModelOptions = {}): string {
    const {size, seed, dtype, chatTemplate, textOnly, contextLength, fillInMiddle} = resolveOptions(opts);
    const template = chatTemplate === undefined ? "" : `-chat${fnv1a(chatTemplate).toString(16).padStart(8, "0")}`;
    const context = contextLength === defaultDemoContextLength ? "" : `-ctx${contextLength}`;
    const fim = fillInMiddle === "repo" ? "-fimrepo" : fillInMiddle ? "-fim" : "";
    return `inference-monitor-demo-${size}-seed${seed}-${dtype}${template}${textOnly ? "-text" : ""}${context}${fim}` +
        `-v${DEMO_MODEL_GENERATOR_VERSION}.gguf`;
}

const inFlight = new Map<string, Promise<string>>();

/**
 * Returns the path of the cached demo model, generating it first if it is missing or has the wrong
 * size. Safe to call concurrently from several processes (atomic rename) and within one process
 * (calls for the same file share one generation).
 */
export async function ensureDemoModel(opts: EnsureDemoModelOptions = {}): Promise<string> {
    const resolved = resolveOptions(opts);
    const file = path.resolve(opts.cacheDir ?? defaultDemoModelCacheDir(), demoModelFileName(resolved));
    const pending = inFlight.get(file);
    if (pending) return await pending;
    const job = (async () => {
        const expected = demoModelFileSize(resolved);
        const stat = await fs.stat(file).catch(() => undefined);
        if (!(stat?.isFile() && stat.size === expected)) await writeDemoModel(file, resolved);
        return file;
    })().finally(() => inFlight.delete(file));
    inFlight.set(file, job);
    return await job;
}
