/**
 * Non-ASCII prompts through the OpenAI-compatible endpoint with the official `openai` client:
 * /v1/completions and /v1/chat/completions, streamed and not. Prompt token counts are the tokenizer's,
 * nothing crashes, and no U+FFFD appears (the text-only demo model never samples a byte-fallback token,
 * so a U+FFFD could only come from mishandling the prompt's multi-byte characters).
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {testCacheDir} from "../helpers/testModels.js";

const prompts = [
    "Grüße aus Köln — naïve café, señor",
    "日本語のテキストと中文字符",
    "emoji 😀🎉 👍🏽 👩‍👩‍👧‍👦 and e\u0301 combining",
    "𝄞 música 🚀 עברית Ελληνικά"
];
const ignoreEos = {ignore_eos: true} as Record<string, unknown>;

describe("non-ASCII prompts through the OpenAI-compatible endpoint", () => {
    const api = apiForSuite(async () => ({modelPath: await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir})}));

    test("/v1/completions: prompt_tokens = the tokenizer's count, text without U+FFFD, streamed and not", async () => {
        for (const prompt of prompts) {
            const completion = await api.openai.completions.create({model: "m", prompt, max_tokens: 6, seed: 1, ...ignoreEos});
            // The tokenizer's count and the BOS the demo vocabulary begins a text with (as llama.cpp's server counts it).
            assert.equal(completion.usage!.prompt_tokens, await api.client.countTokens(prompt) + 1, prompt);
            assert.equal(completion.usage!.completion_tokens, 6);
            assert.ok(!completion.choices[0]!.text.includes("\uFFFD"), completion.choices[0]!.text);

            const stream = await api.openai.completions.create({model: "m", prompt, max_tokens: 6, seed: 1, stream: true,
                stream_options: {include_usage: true}, ...ignoreEos});
            let streamed = "";
            let promptTokens: number | undefined;
            for await (const chunk of stream) {
                streamed += chunk.choices[0]?.text ?? "";
                promptTokens = chunk.usage?.prompt_tokens ?? promptTokens;
            }
            assert.equal(promptTokens, completion.usage!.prompt_tokens);
            assert.equal(streamed, completion.choices[0]!.text, "same seed, same text");
        }
    });

    test("/v1/chat/completions: non-ASCII messages counted as rendered, replies without U+FFFD, streamed and not", async () => {
        for (const content of prompts) {
            const messages = [{role: "system" as const, content: "Réponds brièvement 🙂"}, {role: "user" as const, content}];
            const rendered = `system: ${messages[0].content}\nuser: ${content}\nassistant:`; // the documented fallback (no chat template)
            const completion = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 5, seed: 2, ...ignoreEos});
            assert.equal(completion.usage!.prompt_tokens, await api.client.countTokens(rendered) + 1, content);
            const reply = completion.choices[0]!.message.content ?? "";
            assert.ok(!reply.includes("\uFFFD"), reply);

            const stream = await api.openai.chat.completions.create({model: "m", messages, max_tokens: 5, seed: 2, stream: true,
                stream_options: {include_usage: true}, ...ignoreEos});
            let streamed = "";
            let promptTokens: number | undefined;
            for await (const chunk of stream) {
                streamed += chunk.choices[0]?.delta.content ?? "";
                promptTokens = chunk.usage?.prompt_tokens ?? promptTokens;
            }
            assert.equal(promptTokens, completion.usage!.prompt_tokens);
            assert.ok(streamed.trim() !== "" && !streamed.includes("\uFFFD"), JSON.stringify(streamed));
        }
    });
});
