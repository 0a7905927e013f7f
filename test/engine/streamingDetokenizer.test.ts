/**
 * StreamingDetokenizer with a real SentencePiece tokenizer (the demo model's: characters outside its
 * pieces become byte-fallback tokens <0xE2>…, one per UTF-8 byte): text split across tokens comes out
 * whole, never as U+FFFD, and the chunks add up to the full detokenization. Then non-ASCII prompts
 * through the engine.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel, type Token} from "../../engine/llamaTypes.js";
import {StreamingDetokenizer} from "../../engine/streamingDetokenizer.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";

/** Two-, three- and four-byte characters, ZWJ and skin-tone emoji sequences, CJK, combining marks, RTL. */
const samples = [
    "héllo wörld, ça va? naïve café",
    "日本語のテキスト、中文字符和한국어",
    "emoji 😀🎉 then 👍🏽 and 👩‍👩‍👧‍👦 family",
    "combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 — dash “quotes” …",
    "mixed ASCII and אבג עברית and Ελληνικά 🚀 end",
    "€ ¥ £ ₹ 𝄞 𐍈"
];

/** Whether `text` is exactly what its UTF-8 encoding decodes to (no lone surrogate, so no half character). */
function isWellFormed(text: string): boolean {
    return Buffer.from(text, "utf8").toString("utf8") === text;
}

describe("StreamingDetokenizer (demo tokenizer, byte-fallback tokens)", () => {
    let llama: Llama;
    let model: LlamaModel;

    before(async () => {
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        model = await llama.loadModel({modelPath: await tinyModelPath()});
    });
    after(async () => {
        await model.dispose();
        await llama.dispose();
    });

    for (const sample of samples) {
        test(`token by token: ${JSON.stringify(sample)}`, () => {
            const tokens = model.tokenize(sample, false);
            const byteTokens = tokens.filter((token) => token >= 3 && token < 3 + 256);
            const whole = model.detokenize(tokens);
            assert.ok(!whole.includes("\uFFFD"), `the tokenizer itself round-trips: ${JSON.stringify(whole)}`);
            const detokenizer = new StreamingDetokenizer(model);
            const chunks = tokens.map((token) => detokenizer.push(token));
            chunks.push(detokenizer.flush());
            for (const chunk of chunks) {
                assert.ok(!chunk.includes("\uFFFD"), `U+FFFD in chunk ${JSON.stringify(chunk)} of ${JSON.stringify(chunks)}`);
                assert.ok(isWellFormed(chunk), `chunk ${JSON.stringify(chunk)} ends or starts mid-character`);
            }
            assert.equal(chunks.join(""), whole);
            assert.ok(tokens.length > [...sample].length / 4, `${tokens.length} tokens (${byteTokens.length} byte tokens)`);
        });
    }

    test("the samples do split characters across byte-fallback tokens (the case under test)", () => {
        const split = samples.map((sample) => model.tokenize(sample, false).filter((token) => model.detokenize([token]) === "\uFFFD").length);
        assert.ok(split.every((count) => count > 0), `byte tokens per sample: ${split.join(", ")}`);
    });

    test("all samples in one stream, and genuinely invalid bytes still come out (as U+FFFD) without losing what follows", () => {
        const tokens = samples.flatMap((sample) => model.tokenize(`${sample}\n`, false));
        const detokenizer = new StreamingDetokenizer(model);
        const text = tokens.map((token) => detokenizer.push(token)).join("") + detokenizer.flush();
        assert.equal(text, model.detokenize(tokens));
        assert.ok(!text.includes("\uFFFD"));

        const byte = (value: number) => 3 + value as Token; // the demo vocabulary: <unk>, <s>, </s>, then <0x00>…<0xFF>
        assert.equal(model.detokenize([byte(0x41)]), "A");
        const invalid = [byte(0xe2), byte(0x82), ...model.tokenize(" end é", false)]; // a cut-off "€", then text
        const stream = new StreamingDetokenizer(model);
        const out = invalid.map((token) => stream.push(token)).join("") + stream.flush();
        assert.match(out, /\uFFFD/);
        assert.ok(out.endsWith(" end é"), JSON.stringify(out));
    });
});

describe("non-ASCII prompts through the engine", () => {
    let engine: EngineUnderTest;
    let llama: Llama;
    let model: LlamaModel;

    before(async () => {
        // The text-only variant never samples a byte-fallback token, so any U+FFFD would come from the prompt's handling.
        const modelPath = await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        engine = await EngineUnderTest.start({modelPath, parallel: 2});
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        model = await llama.loadModel({modelPath});
    });
    after(async () => {
        await engine.engine.dispose();
        await model.dispose();
        await llama.dispose();
    });

    test("prompt tokens are the tokenizer's count and BOS; generation runs; no U+FFFD", async () => {
        for (const prompt of samples) {
            const {text, finished} = await engine.generate({prompt, maxTokens: 8, ignoreEos: true});
            assert.equal(finished.reason, "length", prompt);
            assert.equal(finished.generatedTokens, 8);
            // The tokenizer's count, and the BOS this vocabulary begins a text with.
            assert.equal(finished.promptTokens, model.tokenize(prompt, false).length + 1, prompt);
            assert.ok(!text.includes("\uFFFD"), JSON.stringify(text));
        }
        const chat = await engine.generate({messages: [{role: "user", content: samples[2]!}], maxTokens: 4, ignoreEos: true});
        assert.equal(chat.finished.reason, "length");
        assert.equal(chat.finished.promptTokens, model.tokenize(`user: ${samples[2]}\nassistant:`, false).length + 1);
    });
});
