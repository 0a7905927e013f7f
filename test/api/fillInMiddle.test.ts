/**
 * Prompts as llama.cpp's own server evaluates them, on the same model file: a completion's text prompt (BOS where the
 * vocabulary asks for it, special tokens' text read as those tokens) and fill in the middle (`suffix`) on a demo model
 * with FIM tokens — the same prompt token counts as llama-server's `/v1/completions` and `/infill`; then FIM through
 * Ollama's `/api/generate` (raw or not) and what `/api/show` tells Continue (its FIM test: `.Suffix` in the template).
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {Ollama} from "ollama";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

async function post(origin: string, path: string, body: unknown): Promise<Record<string, unknown>> {
    const response = await fetch(`${origin}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
    return await response.json() as Record<string, unknown>;
}

const promptTokensOf = (answer: Record<string, unknown>): number => (answer.usage as {prompt_tokens: number}).prompt_tokens;

const suite = "prompts and fill in the middle, against llama.cpp's llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: true});
    const api = apiForSuite(async () => ({modelPath: await modelPath(), contextSize: 1024}));
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    let peer: LlamaServer;

    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(), args: ["-t", "1", "-np", "1", "-c", "1024", "--no-webui"],
            readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });

    test("a completion's prompt: BOS first and special tokens' text as those tokens, as llama-server counts it", async () => {
        for (const prompt of ["Once upon a time", "<|fim_prefix|>def f(<|fim_suffix|>return x<|fim_middle|>", "</s> and <s> as text"]) {
            const body = {model: "m", prompt, max_tokens: 1, temperature: 0};
            const [mine, theirs] = await Promise.all([post(ours(), "/v1/completions", body), post(peer.origin, "/v1/completions", body)]);
            assert.equal(promptTokensOf(mine), promptTokensOf(theirs), JSON.stringify(prompt));
        }
        // The markup prompt is read as its tokens: far fewer than its characters' pieces.
        const markup = await post(ours(), "/tokenize", {content: "<|fim_prefix|>x", parse_special: true});
        assert.equal((markup.tokens as number[]).length, 2);
    });

    test("`suffix` fills in the middle: the same prompt as llama-server's /infill; the answer is a completion", async () => {
        const prefix = "def add(a, b):\n    ";
        const suffix = "\n    return result\n";
        const mine = await api.openai.completions.create({model: "m", prompt: prefix, suffix, max_tokens: 8, temperature: 0});
        // One token: llama-server fails a completion whose text is not in its content format, which random weights soon write.
        const theirs = await post(peer.origin, "/infill", {input_prefix: prefix, input_suffix: suffix, n_predict: 1, temperature: 0});
        assert.equal(mine.usage?.prompt_tokens, theirs.tokens_evaluated);
        assert.equal(mine.usage?.completion_tokens, 8);
        assert.equal(mine.choices[0]!.finish_reason, "length");
    });

    test("Ollama: /api/show says FIM (capability insert, `.Suffix` in the template); /api/generate with suffix, raw or not, is the same FIM", async () => {
        const ollama = new Ollama({host: ours()});
        const shown = await ollama.show({model: "m"});
        assert.ok(shown.capabilities.includes("insert"), JSON.stringify(shown.capabilities));
        assert.ok(shown.template.includes(".Suffix"), shown.template);
        assert.equal(shown.parameters, `num_ctx ${api.client.info!.contextSize}`);
        const prefix = "def add(a, b):\n    ";
        const suffix = "\n    return result\n";
        const completion = await api.openai.completions.create({model: "m", prompt: prefix, suffix, max_tokens: 8, temperature: 0});
        for (const raw of [false, true]) {
            const answer = await ollama.generate({model: "m", prompt: prefix, suffix, raw, stream: false, options: {temperature: 0, num_predict: 8, repeat_penalty: 1}});
            assert.equal(answer.prompt_eval_count, completion.usage?.prompt_tokens);
            assert.equal(answer.response, completion.choices[0]!.text);
        }
    });
});
