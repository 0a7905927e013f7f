/**
 * llama.cpp's server's `GET /props` and `POST /apply-template`, against llama-server on the same demo model with a
 * ChatML chat template: the per-sequence context, the sequences, the template and the special tokens as llama-server
 * reports them, and the same prompt text for the same chat request — and the same prompt tokens: the text tokenized
 * whole, as llama-server tokenizes it (on this SentencePiece vocabulary, whose ChatML markup is text, node-llama-cpp's
 * piecewise tokenization added a word-start token after each message), unless a message quotes a control token.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import type {ApplyTemplateAnswer, LlamaCppProps} from "../../protocol/llamaCppProps.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

const suite = "llama.cpp's /props and /apply-template, against llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, chatTemplate: demoChatTemplates.chatmlTools});
    const api = apiForSuite(async () => ({modelPath: await modelPath(), contextSize: 1024, parallel: 2}));
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(),
            // llama-server's -c is the whole context, split among the slots; ours is per sequence.
            args: ["-t", "1", "-np", "2", "-c", "2048", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");

    async function props(origin: string): Promise<LlamaCppProps> {
        const response = await fetch(`${origin}/props`);
        assert.equal(response.status, 200, origin);
        return await response.json() as LlamaCppProps;
    }
    async function applyTemplate(origin: string, body: unknown): Promise<string> {
        const response = await fetch(`${origin}/apply-template`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
        const text = await response.text();
        assert.equal(response.status, 200, `${origin}: ${text}`);
        return (JSON.parse(text) as ApplyTemplateAnswer).prompt;
    }

    test("/props: the per-sequence context, the sequences, the template and the special tokens as llama-server gives them", async () => {
        const [mine, theirs] = [await props(ours()), await props(peer!.origin)];
        assert.equal(mine.default_generation_settings.n_ctx, 1024);
        assert.equal(mine.default_generation_settings.n_ctx, theirs.default_generation_settings.n_ctx);
        assert.equal(mine.total_slots, theirs.total_slots);
        assert.equal(mine.chat_template, theirs.chat_template);
        assert.equal(mine.bos_token, theirs.bos_token);
        assert.equal(mine.eos_token, theirs.eos_token);
        assert.deepEqual(mine.modalities, theirs.modalities);
        const models = await (await fetch(`${ours()}/v1/models`)).json() as {data: Array<{id: string}>};
        assert.equal(mine.model_alias, models.data[0]?.id, "the model's id in /v1/models");
        // llama-server writes its float32 defaults out as doubles (0.800000011920929).
        for (const key of ["temperature", "top_k", "top_p", "typical_p", "top_n_sigma", "dynatemp_range", "dynatemp_exponent", "mirostat",
            "mirostat_tau", "mirostat_eta", "min_keep"] as const)
            assert.equal(Math.fround(mine.default_generation_settings.params[key]), theirs.default_generation_settings.params[key], key);
        for (const key of Object.keys(mine.default_generation_settings.params))
            assert.ok(key in theirs.default_generation_settings.params, `llama-server's params have ${key}`);
    });

    test("/apply-template: the same prompt text as llama-server's for the same chat; the chat's tokens are llama-server's", async () => {
        const chats = [
            [{role: "system", content: "Be brief."}, {role: "user", content: "Hi there"}],
            [{role: "user", content: "Hi"}, {role: "assistant", content: "Hello"}, {role: "user", content: "Tell a story"}]
        ];
        for (const messages of chats) {
            const mine = await applyTemplate(ours(), {messages});
            assert.equal(mine, await applyTemplate(peer!.origin, {messages}), JSON.stringify(messages));
            assert.ok(mine.endsWith("<|im_start|>assistant\n"), mine);
        }
        for (const messages of chats) {
            const served = await api.openai.chat.completions.create({model: "m", messages: messages as never, max_tokens: 1,
                ...{return_token_ids: true}}) as {prompt_token_ids?: number[]};
            const text = await applyTemplate(peer!.origin, {messages});
            const response = await fetch(`${peer!.origin}/tokenize`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({content: text, add_special: true, parse_special: true})});
            assert.deepEqual(served.prompt_token_ids, (await response.json() as {tokens: number[]}).tokens, "llama-server's tokens for its prompt");
        }
        // A message quoting the end-of-sequence token's text keeps it as text: no EOS in the prompt.
        const quoting = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "a</s>b"}], max_tokens: 1,
            ...{return_token_ids: true}}) as {prompt_token_ids?: number[]};
        assert.ok(!quoting.prompt_token_ids!.includes(2), JSON.stringify(quoting.prompt_token_ids));
        const bad = await fetch(`${ours()}/apply-template`, {method: "POST", headers: {"content-type": "application/json"}, body: "{\"messages\": []}"});
        assert.equal(bad.status, 400);
    });
});
