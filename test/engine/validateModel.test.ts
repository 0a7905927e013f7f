import assert from "node:assert/strict";
import {existsSync} from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {demoModelGgufSpec, demoModelSizes, writeDemoModel, type DemoModelGgufSpec} from "../../engine/model/demoModel.js";
import {computeGgufLayout, writeGguf, type GgufMetadataValue} from "../../engine/model/ggufWriter.js";
import {maxModelNameLength} from "../../common/displayText.js";
import {ModelFileError, validateModelFile, type ModelFileErrorCode} from "../../engine/model/validateModel.js";
import {stories260KPath} from "../helpers/sharedModels.js";

// None of these tests may load a model natively: llama.cpp aborts the process on some of these files.

const STORIES_260K = stories260KPath;

let tmpDir = "";
let tinyModel = "";

before(async () => {
    tmpDir = await fs.mkdtemp(path.join(os.tmpdir(), "im-validate-model-"));
    tinyModel = path.join(tmpDir, "tiny.gguf");
    await writeDemoModel(tinyModel, {size: "tiny", seed: 0});
});

after(async () => {
    await fs.rm(tmpDir, {recursive: true, force: true});
});

async function assertRejects(file: string, code: ModelFileErrorCode, message?: RegExp): Promise<ModelFileError> {
    let caught: unknown;
    try {
        await validateModelFile(file);
    } catch (error) {
        caught = error;
    }
    assert.ok(caught instanceof ModelFileError, `expected a ModelFileError, got ${String(caught)}`);
    assert.equal(caught.code, code, caught.message);
    if (message) assert.match(caught.message, message);
    return caught;
}

/** Writes a variant of the tiny demo model through the real GGUF writer. */
async function writeVariant(name: string, edit: (spec: DemoModelGgufSpec) => DemoModelGgufSpec): Promise<string> {
    const file = path.join(tmpDir, name);
    const spec = edit(demoModelGgufSpec({size: "tiny", seed: 0}));
    const handle = await fs.open(file, "w");
    try {
        await writeGguf(handle, spec.metadata, spec.tensors);
    } finally {
        await handle.close();
    }
    return file;
}

const withoutKey = (key: string) => (spec: DemoModelGgufSpec): DemoModelGgufSpec => ({
    ...spec,
    metadata: spec.metadata.filter((entry) => entry.key !== key)
});

async function writePrefix(name: string, source: string, bytes: number): Promise<string> {
    const file = path.join(tmpDir, name);
    await fs.writeFile(file, (await fs.readFile(source)).subarray(0, bytes));
    return file;
}

describe("validateModelFile rejects bad files before any native load", () => {
    test("missing path", async () => {
        const missing = path.join(tmpDir, "does-not-exist.gguf");
        await assertRejects(missing, "ENOENT", new RegExp(`^Model file not found: ${missing.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
        await assertRejects(path.join(tinyModel, "child.gguf"), "ENOENT");
    });

    test("a directory", async () => {
        await assertRejects(tmpDir, "EISDIR", /directory/);
    });

    test("an empty file", async () => {
        const file = path.join(tmpDir, "empty.gguf");
        await fs.writeFile(file, "");
        await assertRejects(file, "EMPTY", /empty/);
    });

    test("non-GGUF files", async () => {
        const text = path.join(tmpDir, "notes.gguf");
        await fs.writeFile(text, "This is just some text, not a model.\n");
        await assertRejects(text, "NOT_GGUF", /^Not a GGUF file \(bad magic\): /);
        const short = path.join(tmpDir, "short.gguf");
        await fs.writeFile(short, "GG");
        await assertRejects(short, "NOT_GGUF");
        const binary = path.join(tmpDir, "binary.bin");
        await fs.writeFile(binary, Buffer.from(Array.from({length: 4096}, (_, i) => (i * 7919) & 0xff)));
        await assertRejects(binary, "NOT_GGUF");
    });

    test("a GGUF truncated in its data section", async () => {
        const {size} = await fs.stat(tinyModel);
        const half = await writePrefix("half.gguf", tinyModel, Math.floor(size / 2));
        const error = await assertRejects(half, "TRUNCATED", /^GGUF file is truncated: expected ≥ \d+ bytes, file has \d+/);
        assert.match(error.message, new RegExp(`expected ≥ ${size} bytes, file has ${Math.floor(size / 2)}`));
        await assertRejects(await writePrefix("minus-one.gguf", tinyModel, size - 1), "TRUNCATED");
    });

    test("a GGUF truncated inside its header", async () => {
        const spec = demoModelGgufSpec({size: "tiny", seed: 0});
        const headerLength = computeGgufLayout(spec.metadata, spec.tensors).header.length;
        for (const bytes of [4, 7, 12, 24, 100, 3000, Math.floor(headerLength / 2), headerLength - 1, headerLength + 10])
            await assertRejects(await writePrefix(`header-${bytes}.gguf`, tinyModel, bytes), "TRUNCATED", /truncated/);
    });

    test("a llama GGUF missing llama.feed_forward_length", async () => {
        const file = await writeVariant("no-ffn.gguf", withoutKey("llama.feed_forward_length"));
        await assertRejects(file, "BAD_METADATA", /llama\.feed_forward_length/);
    });

    test("a llama GGUF missing other required keys", async () => {
        for (const key of [
            "llama.attention.head_count",
            "llama.embedding_length",
            "llama.block_count",
            "llama.context_length",
            "llama.attention.layer_norm_rms_epsilon",
            "general.architecture",
            "tokenizer.ggml.tokens"
        ]) {
            const file = await writeVariant(`no-${key}.gguf`, withoutKey(key));
            await assertRejects(file, "BAD_METADATA", new RegExp(key.replace(/\./g, "\\.")));
        }
    });

    test("inconsistent llama hyper-parameters", async () => {
        const setU32 = (key: string, value: number) => (spec: DemoModelGgufSpec): DemoModelGgufSpec => ({
            ...spec,
            metadata: spec.metadata.map((entry) => (entry.key === key ? {key, value: {type: "uint32", value}} : entry))
        });
        await assertRejects(await writeVariant("zero-heads.gguf", setU32("llama.attention.head_count", 0)), "BAD_METADATA", /head_count/);
        await assertRejects(await writeVariant("bad-kv.gguf", setU32("llama.attention.head_count_kv", 3)), "BAD_METADATA", /head_count_kv/);
        await assertRejects(await writeVariant("bad-rope.gguf", setU32("llama.rope.dimension_count", 7)), "BAD_METADATA", /rope\.dimension_count/);
    });

    test("lower-case byte tokens", async () => {
        const file = await writeVariant("lower-bytes.gguf", (spec) => ({
            ...spec,
            metadata: spec.metadata.map((entry) =>
                entry.key === "tokenizer.ggml.tokens" && entry.value.type === "stringArray"
                    ? {key: entry.key, value: {type: "stringArray", value: entry.value.value.map((t) => t.replace(/^<0x([0-9A-F]{2})>$/, (_, h: string) => `<0x${h.toLowerCase()}>`))}}
                    : entry
            )
        }));
        await assertRejects(file, "BAD_METADATA", /<0x0a>|upper-case/);
    });

    test("an unsupported GGUF version", async () => {
        const bytes = await fs.readFile(tinyModel);
        bytes.writeUInt32LE(1, 4);
        const file = path.join(tmpDir, "v1.gguf");
        await fs.writeFile(file, bytes);
        await assertRejects(file, "BAD_METADATA", /version 1/);
    });

    // Whether each kind of corruption is refused (with which reason) or loads: corruptGguf.test.ts.
    test("random header corruption never throws anything but ModelFileError (and never hangs)", async () => {
        const original = await fs.readFile(tinyModel);
        const spec = demoModelGgufSpec({size: "tiny", seed: 0});
        const headerLength = computeGgufLayout(spec.metadata, spec.tensors).header.length;
        let state = 12345;
        const random = (n: number): number => {
            state = (Math.imul(state, 1103515245) + 12345) >>> 0;
            return state % n;
        };
        const file = path.join(tmpDir, "fuzz.gguf");
        for (let i = 0; i < 120; i++) {
            const bytes = Buffer.from(original);
            for (let k = 0; k < 1 + random(3); k++) bytes[4 + random(headerLength - 4)] = random(256);
            await fs.writeFile(file, bytes);
            try {
                await validateModelFile(file);
            } catch (error) {
                assert.ok(error instanceof ModelFileError, `iteration ${i}: ${String(error)}`);
            }
        }
    });
});

const setValue = (key: string, value: GgufMetadataValue) => (spec: DemoModelGgufSpec): DemoModelGgufSpec => ({
    ...spec,
    metadata: spec.metadata.some((entry) => entry.key === key)
        ? spec.metadata.map((entry) => (entry.key === key ? {key, value} : entry))
        : [...spec.metadata, {key, value}]
});
const u32 = (value: number): GgufMetadataValue => ({type: "uint32", value});
const tokenizerModel = (model: string) => setValue("tokenizer.ggml.model", {type: "string", value: model});
const mapTokens = (map: (token: string, id: number) => string) => (spec: DemoModelGgufSpec): DemoModelGgufSpec => ({
    ...spec,
    metadata: spec.metadata.map((entry) => entry.key === "tokenizer.ggml.tokens" && entry.value.type === "stringArray"
        ? {key: entry.key, value: {type: "stringArray", value: entry.value.value.map(map)}}
        : entry)
});
const withoutByteTypes = (spec: DemoModelGgufSpec): DemoModelGgufSpec => ({
    ...spec,
    metadata: spec.metadata.map((entry) => entry.key === "tokenizer.ggml.token_type" && entry.value.type === "int32Array"
        ? {key: entry.key, value: {type: "int32Array", value: Array.from(entry.value.value, (t) => (t === 6 ? 1 : t))}}
        : entry)
});

describe("validateModelFile rejects what llama.cpp would abort on", () => {
    test("block_count outside llama.cpp's 1..512 layers", async () => {
        for (const count of [513, 100_000])
            await assertRejects(await writeVariant(`blocks-${count}.gguf`, setValue("llama.block_count", u32(count))), "BAD_METADATA",
                new RegExp(`invalid llama\\.block_count \\(${count}\\) — llama\\.cpp supports 1 to 512 layers`));
    });

    test("block_count inconsistent with the blk.N tensors", async () => {
        await assertRejects(await writeVariant("blocks-3.gguf", setValue("llama.block_count", u32(3))), "BAD_METADATA",
            /block_count = 3, but the file has tensors for layer 3/);
        await assertRejects(await writeVariant("blocks-5.gguf", setValue("llama.block_count", u32(5))), "BAD_METADATA",
            /block_count = 5, but the file has no tensors for layer 4/);
        await assertRejects(await writeVariant("nextn.gguf", setValue("llama.nextn_predict_layers", u32(9))), "BAD_METADATA",
            /nextn_predict_layers \(9\) — at most llama\.block_count \(4\)/);
    });

    test("a tokenizer model its vocabulary does not suit", async () => {
        await assertRejects(await writeVariant("tok-bert.gguf", tokenizerModel("bert")), "BAD_METADATA",
            /byte token 3 \(<0x00>\), which a bert \(WordPiece\) tokenizer cannot decode/);
        for (const model of ["none", "no_vocab"])
            await assertRejects(await writeVariant(`tok-${model}.gguf`, tokenizerModel(model)), "BAD_METADATA", /has no vocabulary/);
        await assertRejects(await writeVariant("tok-foo.gguf", tokenizerModel("foo")), "BAD_METADATA", /unknown tokenizer\.ggml\.model foo/);
        await assertRejects(await writeVariant("tok-missing.gguf", withoutKey("tokenizer.ggml.model")), "BAD_METADATA",
            /missing required key tokenizer\.ggml\.model/);
        for (const model of ["gpt2", "gemma4", "whitespace", "hybriddna"])
            await assertRejects(await writeVariant(`tok-${model}.gguf`, tokenizerModel(model)), "BAD_METADATA",
                new RegExp(`missing tokenizer\\.ggml\\.merges, which a ${model} \\(BPE\\) tokenizer needs`));
        await assertRejects(await writeVariant("tok-rwkv.gguf", tokenizerModel("rwkv")), "BAD_METADATA",
            /rwkv vocabulary has no token for the byte 0x00/);
    });

    test("duplicate tokens, and a llama vocabulary missing byte tokens", async () => {
        await assertRejects(await writeVariant("dup.gguf", mapTokens((t, id) => (id === 5 ? "<0x03>" : t))), "BAD_METADATA",
            /token <0x03> twice \(ids 5 and 6\)/);
        const noBytes = mapTokens((t) => t.replace(/^<0x([0-9A-F]{2})>$/, "<b$1>"));
        await assertRejects(await writeVariant("no-bytes.gguf", (spec) => withoutByteTypes(noBytes(spec))), "BAD_METADATA",
            /no byte token <0x00>; llama\.cpp needs all 256/);
    });

    test("tokenizer models the vocabulary suits pass", async () => {
        for (const model of ["t5", "plamo2"])
            assert.equal((await validateModelFile(await writeVariant(`tok-ok-${model}.gguf`, tokenizerModel(model)))).vocabSize,
                demoModelSizes.tiny.vocabSize);
        await validateModelFile(await writeVariant("tok-ok-bert.gguf", (spec) => withoutByteTypes(tokenizerModel("bert")(spec))));
        await validateModelFile(await writeVariant("tok-ok-gpt2.gguf", (spec) =>
            setValue("tokenizer.ggml.merges", {type: "stringArray", value: ["t h"]})(tokenizerModel("gpt2")(spec))));
    });
});

describe("validateModelFile accepts valid models", () => {
    test("an absurd context_length is treated as unknown", async () => {
        for (const length of [2 ** 32 - 1, 2 ** 24 + 1])
            assert.equal((await validateModelFile(await writeVariant(`ctx-${length}.gguf`, setValue("llama.context_length", u32(length))))).contextLength,
                undefined, String(length));
        assert.equal((await validateModelFile(await writeVariant("ctx-2^24.gguf", setValue("llama.context_length", u32(2 ** 24))))).contextLength, 2 ** 24);
    });

    test("the tiny demo model", async () => {
        const info = await validateModelFile(tinyModel);
        const {size} = await fs.stat(tinyModel);
        assert.equal(info.path, tinyModel);
        assert.equal(info.sizeBytes, size);
        assert.equal(info.architecture, "llama");
        assert.equal(info.name, "Inference Monitor demo tiny (seed 0)");
        assert.equal(info.parameterCount, demoModelSizes.tiny.parameterCount);
        assert.equal(info.contextLength, demoModelSizes.tiny.shape.contextLength);
        assert.equal(info.blockCount, demoModelSizes.tiny.shape.blockCount);
        assert.equal(info.embeddingLength, demoModelSizes.tiny.shape.embeddingLength);
        assert.equal(info.vocabSize, demoModelSizes.tiny.vocabSize);
        assert.equal(info.fileType, 1);
        assert.equal(info.quantization, "F16");
        assert.equal(info.ggufVersion, 3);
    });

    test("a model name with control characters and 5,000 characters: cleaned and shortened where it is read", async () => {
        const evil = `\u001b[31mEvil\r\nEngine 000: Avg prompt throughput: 9999 tokens/s\u0007 ${"x".repeat(5000)}`;
        const file = await writeVariant("evil-name.gguf", (spec) => ({...spec, metadata: spec.metadata.map((entry) =>
            entry.key === "general.name" ? {key: entry.key, value: {type: "string", value: evil}} : entry)}));
        const info = await validateModelFile(file);
        assert.equal(info.name.length, maxModelNameLength);
        assert.ok(info.name.endsWith("…"));
        assert.ok(info.name.startsWith("[31mEvil Engine 000: Avg prompt throughput: 9999 tokens/s x"), JSON.stringify(info.name.slice(0, 80)));
        assert.ok([...info.name].every((c) => c.charCodeAt(0) >= 0x20 && !(c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f)),
            "no control characters left");
        const blank = await writeVariant("blank-name.gguf", (spec) => ({...spec, metadata: spec.metadata.map((entry) =>
            entry.key === "general.name" ? {key: entry.key, value: {type: "string", value: "\u001b\r\n"}} : entry)}));
        assert.equal((await validateModelFile(blank)).name, "blank-name", "nothing left: the file name");
    });

    test("an f32 demo model and relative paths", async () => {
        const file = path.join(tmpDir, "tiny-f32.gguf");
        await writeDemoModel(file, {size: "tiny", dtype: "f32"});
        const info = await validateModelFile(path.relative(process.cwd(), file));
        assert.equal(info.path, file);
        assert.equal(info.quantization, "F32");
        assert.equal(info.fileType, 0);
    });

    test("a non-default general.alignment", async () => {
        const file = path.join(tmpDir, "align64.gguf");
        const spec = demoModelGgufSpec({size: "tiny", seed: 0});
        const handle = await fs.open(file, "w");
        try {
            await writeGguf(handle, spec.metadata, spec.tensors, {alignment: 64, chunkElements: 1000});
        } finally {
            await handle.close();
        }
        const info = await validateModelFile(file);
        assert.equal(info.parameterCount, demoModelSizes.tiny.parameterCount);
        const {readGgufFileInfo} = await import("node-llama-cpp");
        const parsed = await readGgufFileInfo(file, {logWarnings: false});
        assert.equal(parsed.metadata.general.alignment, 64);
        for (const tensor of parsed.tensorInfo ?? []) assert.equal(Number(tensor.fileOffset) % 64, 0, tensor.name);
        // Same values regardless of alignment and chunking: the first tensor's bytes match the default file.
        const reference = await fs.readFile(tinyModel);
        const aligned = await fs.readFile(file);
        const referenceInfo = await readGgufFileInfo(tinyModel, {logWarnings: false});
        const first = (info: typeof parsed) => Number(info.tensorInfo?.[0]?.fileOffset);
        const length = 128 * demoModelSizes.tiny.vocabSize * 2;
        assert.ok(aligned.subarray(first(parsed), first(parsed) + length).equals(reference.subarray(first(referenceInfo), first(referenceInfo) + length)));
    });

    test("trailing bytes after the data section are tolerated", async () => {
        const file = path.join(tmpDir, "padded.gguf");
        await fs.writeFile(file, Buffer.concat([await fs.readFile(tinyModel), Buffer.alloc(100)]));
        assert.equal((await validateModelFile(file)).architecture, "llama");
    });

    test("the stories260K reference model", {skip: !existsSync(STORIES_260K) && `${STORIES_260K} not present`}, async () => {
        const info = await validateModelFile(STORIES_260K);
        assert.equal(info.architecture, "llama");
        assert.equal(info.vocabSize, 512);
        assert.equal(info.blockCount, 5);
        assert.equal(info.embeddingLength, 64);
        assert.equal(info.quantization, "F32"); // no general.file_type: inferred from the tensors
        assert.ok(info.parameterCount > 250_000 && info.parameterCount < 300_000, String(info.parameterCount));
    });
});
