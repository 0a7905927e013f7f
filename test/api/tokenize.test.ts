/**
 * `/tokenize` and `/detokenize` on our endpoint, compared with llama.cpp's own server on the same model file: the
 * same ids for the same text (llama.cpp's body shape), pieces, text back; vLLM's body shape on the same route; a
 * chat's prompt as the chat endpoint evaluates it; refusals (an id outside the vocabulary must not reach llama.cpp).
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

const texts = ["Once upon a time, there was a little robot.", "  two  spaces\nand a line", "unicode: café, 東京, 🙂", "<s> special </s>", ""];

async function post(origin: string, path: string, body: unknown): Promise<{status: number, json: Record<string, unknown>}> {
    const response = await fetch(`${origin}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    return {status: response.status, json: await response.json() as Record<string, unknown>};
}

const suite = "tokenizer endpoints, against llama.cpp's llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir});
    const api = apiForSuite(async () => ({modelPath: await modelPath()}));
    let peer: LlamaServer;
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");

    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(), args: ["-t", "1", "-np", "1", "-c", "1024", "--no-webui"],
            readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });

    test("llama.cpp's shape: the same ids and pieces as llama-server, and the same text back", async () => {
        for (const content of texts)
            for (const parseSpecial of [true, false]) {
                const body = {content, parse_special: parseSpecial, with_pieces: true};
                const [mine, theirs] = await Promise.all([post(ours(), "/tokenize", body), post(peer.origin, "/tokenize", body)]);
                assert.equal(mine.status, 200, JSON.stringify(mine.json));
                const idsOf = (json: Record<string, unknown>): number[] => (json.tokens as Array<{id: number}>).map((token) => token.id);
                assert.deepEqual(idsOf(mine.json), idsOf(theirs.json), `${JSON.stringify(content)} parse_special ${parseSpecial}`);
                // A piece that is part of a UTF-8 character is its bytes in llama-server's answer; ours reads as U+FFFD.
                if ([...content].every((char) => char.charCodeAt(0) < 128))
                    assert.deepEqual(mine.json.tokens, theirs.json.tokens, `pieces of ${JSON.stringify(content)}`);
                const ids = (theirs.json.tokens as Array<{id: number}>).map((token) => token.id);
                const [back, theirBack] = await Promise.all([post(ours(), "/detokenize", {tokens: ids}), post(peer.origin, "/detokenize", {tokens: ids})]);
                assert.equal(back.json.content, theirBack.json.content, JSON.stringify(content));
            }
    });

    test("vLLM's shape on the same route: count, max_model_len, token_strs; a chat's prompt as the chat endpoint evaluates it", async () => {
        // vLLM's add_special_tokens (default true) adds BOS as the completion's prompt gets it; special tokens' text is
        // parsed either way (as Hugging Face tokenizers do).
        const plain = await post(ours(), "/tokenize", {model: "m", prompt: texts[0]});
        const llamaShape = await post(ours(), "/tokenize", {content: texts[0]});
        const [bos] = plain.json.tokens as number[];
        assert.deepEqual(plain.json.tokens, [bos, ...llamaShape.json.tokens as number[]]);
        assert.equal((await post(peer.origin, "/detokenize", {tokens: [bos]})).json.content, "<s>");
        const completion = await api.openai.completions.create({model: "m", prompt: texts[0]!, max_tokens: 1});
        assert.equal(plain.json.count, completion.usage?.prompt_tokens, "the count a completion's prompt gets");
        const bare = await post(ours(), "/tokenize", {prompt: texts[3], add_special_tokens: false});
        assert.deepEqual(bare.json.tokens, (await post(ours(), "/tokenize", {content: texts[3], parse_special: true})).json.tokens);
        assert.equal(plain.json.count, (plain.json.tokens as number[]).length);
        assert.equal(plain.json.max_model_len, api.client.info!.contextSize);
        const messages = [{role: "user", content: "Hello"}, {role: "assistant", content: "Hi."}, {role: "user", content: "Again"}];
        const chat = await post(ours(), "/tokenize", {model: "m", messages, return_token_strs: true});
        const served = await api.openai.chat.completions.create({model: "m", messages: messages as never, max_tokens: 1});
        assert.equal(chat.json.count, served.usage?.prompt_tokens);
        assert.equal((chat.json.token_strs as string[]).join(""), ((await post(ours(), "/detokenize", {tokens: chat.json.tokens})).json.prompt));
    });

    test("vLLM's /tokenizer_info: BOS and EOS text as llama-server's tokenizer writes them, add_bos_token, the context", async () => {
        const response = await fetch(`${ours()}/tokenizer_info`);
        assert.equal(response.status, 200);
        const info = await response.json() as Record<string, unknown>;
        const eos = (await post(ours(), "/tokenize", {prompt: String(info.eos_token), add_special_tokens: false})).json.tokens as number[];
        assert.equal(eos.length, 1, "the EOS text is one token");
        assert.equal((await post(peer.origin, "/detokenize", {tokens: eos})).json.content, info.eos_token);
        const [first] = (await post(peer.origin, "/tokenize", {content: "x", add_special: true})).json.tokens as number[];
        assert.equal((await post(peer.origin, "/detokenize", {tokens: [first]})).json.content, info.bos_token,
            "llama-server's first token when it adds special tokens is BOS");
        assert.equal(info.add_bos_token, true);
        assert.equal(info.model_max_length, api.client.info!.contextSize);
        assert.equal(info.chat_template, undefined, "the tiny demo model has no chat template");
        assert.equal(info.pad_token, null);
    });

    test("refusals: an id outside the vocabulary, a body without text", async () => {
        const vocabulary = api.client.info!.model.vocabularySize!;
        const outside = await post(ours(), "/detokenize", {tokens: [1, vocabulary]});
        assert.equal(outside.status, 400);
        assert.match(JSON.stringify(outside.json), /not in the model's vocabulary/);
        assert.equal((await post(ours(), "/detokenize", {tokens: [-1]})).status, 400);
        assert.equal((await post(ours(), "/tokenize", {text: 5})).status, 400);
        // The engine still serves.
        assert.equal((await post(ours(), "/detokenize", {tokens: [vocabulary - 1]})).status, 200);
    });
});
