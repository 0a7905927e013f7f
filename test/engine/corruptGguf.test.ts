/**
 * Corrupted GGUF files, each with its expected outcome: refused with a reason (by the JS validator or,
 * cleanly, by llama.cpp) or loaded and serving. A file that slips through and then fails, fails
 * without a reason, or crashes the engine process fails its case. Real engine, real generated model.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {demoModelGgufSpec, type DemoModelGgufSpec} from "../../engine/model/demoModel.js";
import {computeGgufLayout, writeGguf, type GgufMetadataValue} from "../../engine/model/ggufWriter.js";
import {EngineClient, EngineLoadError} from "../../extension/host/engineClient/engineClient.js";
import {tinyModelPath} from "../helpers/testModels.js";

let dir = "";
let valid: Buffer = Buffer.alloc(0);
let header: Buffer = Buffer.alloc(0);

before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "im-corrupt-"));
    valid = fs.readFileSync(await tinyModelPath());
    const spec = demoModelGgufSpec({size: "tiny", seed: 0});
    header = computeGgufLayout(spec.metadata, spec.tensors).header;
    assert.ok(valid.subarray(0, header.length).equals(header), "the cached tiny model is the demo spec's file");
});

after(() => {
    fs.rmSync(dir, {recursive: true, force: true});
});

/** Offset just after the length-prefixed string `text` in the header (a key or a tensor name). */
function endOf(text: string): number {
    const bytes = Buffer.from(text, "utf8");
    const at = header.indexOf(Buffer.concat([Buffer.from(new BigUint64Array([BigInt(bytes.length)]).buffer), bytes]));
    assert.ok(at >= 0, `${text} is in the header`);
    return at + 8 + bytes.length;
}

/** The tiny model with `edit` applied to a copy of its bytes. */
function patched(name: string, edit: (bytes: Buffer) => void): string {
    const bytes = Buffer.from(valid);
    edit(bytes);
    const file = path.join(dir, `${name}.gguf`);
    fs.writeFileSync(file, bytes);
    return file;
}

/** Offset of a metadata value (after its key and its u32 type). */
const valueOf = (key: string): number => endOf(key) + 4;
/** Offset of a tensor's info fields (after its name): u32 dims count, u64 dims, u32 type, u64 offset. */
const tensorInfo = (name: string): number => endOf(name);

/** The tiny model written from an edited spec (for edits that change lengths). */
async function rewritten(name: string, set: Record<string, GgufMetadataValue>, edit: (spec: DemoModelGgufSpec) => DemoModelGgufSpec = (s) => s):
Promise<string> {
    const spec = edit(demoModelGgufSpec({size: "tiny", seed: 0}));
    const metadata = spec.metadata.map((entry) => entry.key in set ? {key: entry.key, value: set[entry.key]!} : entry);
    const file = path.join(dir, `${name}.gguf`);
    const handle = await fs.promises.open(file, "w");
    try {
        await writeGguf(handle, metadata, spec.tensors);
    } finally {
        await handle.close();
    }
    return file;
}

type Case = {label: string, make: () => string | Promise<string>, expect: RegExp | "loads"};

const cases: Case[] = [
    {label: "version 1", make: () => patched("version", (b) => b.writeUInt32LE(1, 4)), expect: /unsupported GGUF version 1/},
    {label: "tensor count + 1", make: () => patched("tensor-count", (b) => b.writeUInt32LE(b.readUInt32LE(8) + 1, 8)),
        expect: /truncated|Invalid GGUF header/},
    {label: "metadata count + 1", make: () => patched("kv-count", (b) => b.writeUInt32LE(b.readUInt32LE(16) + 1, 16)),
        expect: /truncated|Invalid GGUF header/},
    {label: "a metadata value type of 99", make: () => patched("value-type", (b) => b.writeUInt32LE(99, endOf("general.name"))),
        expect: /unknown value type 99/},
    {label: "an unknown architecture", make: () => patched("arch", (b) => b.write("llamb", valueOf("general.architecture") + 8)),
        expect: /unknown model architecture: 'llamb'/},
    {label: "llama.block_count renamed", make: () => patched("no-blocks", (b) => b.write("x", endOf("llama.block_count") - 1)),
        expect: /missing required key\(s\) llama\.block_count/},
    {label: "block_count 3 for 4 layers", make: () => patched("blocks-3", (b) => b.writeUInt32LE(3, valueOf("llama.block_count"))),
        expect: /block_count = 3, but the file has tensors for layer 3/},
    {label: "block_count 100000", make: () => patched("blocks-100k", (b) => b.writeUInt32LE(100_000, valueOf("llama.block_count"))),
        expect: /invalid llama\.block_count \(100000\) — llama\.cpp supports 1 to 512 layers/},
    {label: "context_length 2^32 − 1", make: () => patched("ctx-max", (b) => b.writeUInt32LE(0xffffffff, valueOf("llama.context_length"))),
        expect: "loads"},
    {label: "head_count_kv 3", make: () => patched("kv-heads", (b) => b.writeUInt32LE(3, valueOf("llama.attention.head_count_kv"))),
        expect: /head_count_kv \(3\) — it must divide/},
    {label: "rms epsilon NaN", make: () => patched("eps", (b) => b.writeFloatLE(NaN, valueOf("llama.attention.layer_norm_rms_epsilon"))),
        expect: /layer_norm_rms_epsilon \(NaN\)/},
    {label: "an out-of-range eos token id", make: () => patched("eos", (b) => b.writeUInt32LE(99_999, valueOf("tokenizer.ggml.eos_token_id"))),
        expect: "loads"},
    {label: "a byte of general.name", make: () => patched("name", (b) => b.write("X", valueOf("general.name") + 8)), expect: "loads"},
    {label: "a lower-case byte token", make: () => patched("byte-token", (b) => b.write("a", endOf("<0x0A>") - 2)),
        expect: /byte token 13 is "<0x0a>"/},
    {label: "a duplicated token", make: () => patched("dup-token", (b) => b.write("3", endOf("<0x02>") - 2)),
        expect: /token <0x03> twice \(ids 5 and 6\)/},
    {label: "a renamed layer tensor", make: () => patched("tensor-name", (b) => b.write("s", tensorInfo("blk.2.attn_norm.weight") - 1)),
        expect: /Failed to load model: missing tensor 'blk\.2\.attn_norm\.weight'/},
    {label: "a renamed token_embd tensor", make: () => patched("embd-name", (b) => b.write("X", tensorInfo("token_embd.weight") - 1)),
        expect: /Failed to load model: missing tensor 'token_embd\.weight'/},
    {label: "a tensor of layer 7", make: () => patched("tensor-layer", (b) => b.write("7", tensorInfo("blk.2.attn_q.weight") - 15)),
        expect: /tensors for layer 7/},
    {label: "a tensor with a wrong shape", make: () => patched("shape", (b) => b.writeUInt32LE(64, tensorInfo("blk.0.attn_q.weight") + 4)),
        expect: /Failed to load model: tensor 'blk\.0\.attn_k\.weight' has offset \d+, expected \d+/},
    {label: "a tensor of ggml type 200", make: () => patched("type", (b) => b.writeUInt32LE(200, tensorInfo("blk.0.attn_q.weight") + 20)),
        expect: /unsupported ggml type 200/},
    {label: "a misaligned tensor offset", make: () => patched("offset", (b) => {
        const at = tensorInfo("output.weight") + 24;
        b.writeUInt32LE(b.readUInt32LE(at) + 1, at);
    }), expect: /not aligned to 32/},
    {label: "tokenizer model bert on a llama vocabulary", make: () => rewritten("bert", {"tokenizer.ggml.model": {type: "string", value: "bert"}}),
        expect: /byte token 3 \(<0x00>\), which a bert \(WordPiece\) tokenizer cannot decode/},
    {label: "tokenizer model none", make: () => rewritten("none", {"tokenizer.ggml.model": {type: "string", value: "none"}}),
        expect: /no vocabulary/},
    {label: "tokenizer model gpt2 without merges", make: () => rewritten("gpt2", {"tokenizer.ggml.model": {type: "string", value: "gpt2"}}),
        expect: /missing tokenizer\.ggml\.merges/},
    {label: "tokenizer model t5 on a llama vocabulary", make: () => rewritten("t5", {"tokenizer.ggml.model": {type: "string", value: "t5"}}),
        expect: "loads"}
];

describe("corrupted GGUF files: each is refused with its reason, or loads and serves", () => {
    for (const {label, make, expect} of cases) {
        test(label, async () => {
            const client = new EngineClient({modelPath: await make(), threads: 1, parallel: 1, contextSize: 256, statsIntervalMs: 0});
            if (expect === "loads") {
                try {
                    const info = await client.start();
                    assert.equal(info.contextSize, 256);
                    const result = await client.generate({prompt: "Once upon a time é ☃", maxTokens: 3, ignoreEos: true}).done;
                    assert.equal(result.generatedTokens, 3, result.error);
                } finally {
                    await client.stop();
                }
                return;
            }
            await assert.rejects(client.start(), (error: unknown) => {
                assert.ok(error instanceof EngineLoadError, String(error));
                assert.match(error.message, expect);
                assert.doesNotMatch(error.message, /engine exited|signal|SIGABRT/, "a clean refusal, not a crash");
                return true;
            });
        });
    }
});
