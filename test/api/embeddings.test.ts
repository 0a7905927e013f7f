/**
 * Embeddings on our endpoint, with the official `openai` and `ollama` clients, on a real engine: the vectors against
 * llama.cpp's own server on the same model file (`--embeddings --pooling last`: a generative model's last hidden
 * state, what node-llama-cpp's embedding context gives), float and base64, token-id inputs, shortening, refusals,
 * Ollama's `/api/embed` (truncating by default) and legacy `/api/embeddings`, and each input in the stats as a request.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {Ollama} from "ollama";
import OpenAI from "openai";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {MonitoringProxy} from "../../extension/host/proxy/monitoringProxy.js";
import {ProxyStats} from "../../extension/host/proxy/proxyStats.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

const texts = ["Once upon a time, there was a little robot.", "hello world", "unicode: café, 東京"];

function cosine(a: readonly number[], b: readonly number[]): number {
    assert.equal(a.length, b.length);
    let dot = 0, na = 0, nb = 0;
    for (let i = 0; i < a.length; i++) {
        dot += a[i]! * b[i]!;
        na += a[i]! * a[i]!;
        nb += b[i]! * b[i]!;
    }
    return dot / Math.sqrt(na * nb);
}

const norm = (vector: readonly number[]): number => Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));

async function refusalOf(request: Promise<unknown>): Promise<{status: number, param: string | null, code: string | null, message: string}> {
    try {
        await request;
    } catch (error) {
        const apiError = error as {status?: number, error?: {param?: string | null, code?: string | null, message?: string}};
        return {status: apiError.status ?? 0, param: apiError.error?.param ?? null, code: apiError.error?.code ?? null, message: apiError.error?.message ?? ""};
    }
    assert.fail("the request was not refused");
}

const suite = "embeddings, against llama.cpp's llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir});
    const api = apiForSuite(async () => ({modelPath: await modelPath(), contextSize: 1024}));
    let peer: LlamaServer;

    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(),
            args: ["-t", "1", "-np", "1", "-c", "1024", "--no-webui", "--embeddings", "--pooling", "last"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });

    test("the same vectors as llama-server (cosine > 0.9999), unit length, the same token counts; each input a request in the stats", async () => {
        const finished: RequestLifecycle[] = [];
        const stop = api.client.observe({onOutputs: (step) => {
            finished.push(...step.iteration.finished.filter((lifecycle) => lifecycle.client === "openai-js"));
        }});
        const ours = await api.openai.embeddings.create({model: "m", input: texts, encoding_format: "float"});
        stop();
        const theirs = await (await fetch(`${peer.origin}/v1/embeddings`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({input: texts})})).json() as {data: Array<{embedding: number[]}>, usage: {prompt_tokens: number}};
        assert.equal(ours.data.length, texts.length);
        ours.data.forEach((entry, index) => {
            assert.equal(entry.index, index);
            assert.equal(entry.object, "embedding");
            const similarity = cosine(entry.embedding, theirs.data[index]!.embedding);
            assert.ok(similarity > 0.9999, `input ${index}: cosine ${similarity}`);
            assert.ok(Math.abs(norm(entry.embedding) - 1) < 1e-9);
        });
        assert.equal(ours.usage.prompt_tokens, theirs.usage.prompt_tokens);
        assert.equal(ours.model, (await api.openai.models.list()).data[0]!.id);
        // In the stats: one request per input, its prompt tokens, all prefill, no generated tokens.
        assert.equal(finished.length, texts.length);
        assert.equal(finished.reduce((sum, lifecycle) => sum + lifecycle.promptTokens, 0), ours.usage.prompt_tokens);
        for (const lifecycle of finished) {
            assert.equal(lifecycle.reason, "stop");
            assert.equal(lifecycle.generatedTokens, 0);
            assert.ok(lifecycle.metrics.prefillS! > 0 && lifecycle.metrics.queueS! >= 0 && lifecycle.metrics.e2eS! >= lifecycle.metrics.prefillS!,
                JSON.stringify(lifecycle.metrics));
        }
    });

    test("base64 (the SDK's default) decodes to the float answer; token ids embed as their text; shortened vectors", async () => {
        const floats = await api.openai.embeddings.create({model: "m", input: texts[0]!, encoding_format: "float"});
        const viaBase64 = await api.openai.embeddings.create({model: "m", input: texts[0]!});
        const vector = floats.data[0]!.embedding;
        viaBase64.data[0]!.embedding.forEach((value, i) => assert.ok(Math.abs(value - vector[i]!) < 1e-6));
        const {tokens} = await (await fetch(`${api.openai.baseURL.replace(/\/v1$/, "")}/tokenize`, {method: "POST",
            body: JSON.stringify({content: texts[0]})})).json() as {tokens: number[]};
        const fromIds = await api.openai.embeddings.create({model: "m", input: tokens, encoding_format: "float"});
        assert.ok(cosine(fromIds.data[0]!.embedding, vector) > 0.99999);
        const short = await api.openai.embeddings.create({model: "m", input: texts[0]!, dimensions: 16, encoding_format: "float"});
        assert.equal(short.data[0]!.embedding.length, 16);
        assert.ok(Math.abs(norm(short.data[0]!.embedding) - 1) < 1e-9);
        assert.ok(cosine(short.data[0]!.embedding, vector.slice(0, 16)) > 0.99999);
    });

    test("refusals name the input: empty, too long for the context, an id outside the vocabulary, too many dimensions", async () => {
        const empty = await refusalOf(api.openai.embeddings.create({model: "m", input: ["fine", ""]}));
        assert.deepEqual([empty.status, empty.param], [400, "input[1]"]);
        const long = await refusalOf(api.openai.embeddings.create({model: "m", input: ["short", "word ".repeat(2000)]}));
        assert.deepEqual([long.status, long.param, long.code], [400, "input", "context_length_exceeded"]);
        assert.match(long.message, /^input\[1\]: this model's context holds 1024 tokens, but the input has 200\d$/);
        const badId = await refusalOf(api.openai.embeddings.create({model: "m", input: [[1, 2, 999_999]]}));
        assert.deepEqual([badId.status, badId.param], [400, "input"]);
        assert.match(badId.message, /token 999999 is not in the model's vocabulary/);
        const dims = await refusalOf(api.openai.embeddings.create({model: "m", input: "x", dimensions: 100_000}));
        assert.deepEqual([dims.status, dims.param], [400, "dimensions"]);
    });

    test("Ollama's /api/embed: the same unit vectors, a too-long input truncated unless truncate is false; legacy /api/embeddings raw", async () => {
        const ollama = new Ollama({host: api.openai.baseURL.replace(/\/v1$/, "")});
        const openai = await api.openai.embeddings.create({model: "m", input: texts, encoding_format: "float"});
        const embedded = await ollama.embed({model: "m", input: texts});
        assert.equal(embedded.embeddings.length, texts.length);
        embedded.embeddings.forEach((vector, i) => assert.ok(cosine(vector, openai.data[i]!.embedding) > 0.99999));
        assert.equal(embedded.prompt_eval_count, openai.usage.prompt_tokens);
        assert.ok(embedded.total_duration > 0);
        const long = "word ".repeat(2000);
        const truncated = await ollama.embed({model: "m", input: long});
        assert.equal(truncated.prompt_eval_count, 1023, "the context's room, with the beginning token");
        await assert.rejects(ollama.embed({model: "m", input: long, truncate: false}), /context holds 1024 tokens/);
        const legacy = await ollama.embeddings({model: "m", prompt: texts[1]!});
        assert.ok(cosine(legacy.embedding, openai.data[1]!.embedding) > 0.99999);
        assert.ok(Math.abs(norm(legacy.embedding) - 1) > 1e-3, "the legacy route's vector is not normalized, as Ollama's");
    });

    test("generation keeps serving while embeddings run, and the llama.cpp alias /embeddings answers", async () => {
        const [chat, embeddings] = await Promise.all([
            api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 16}),
            api.openai.embeddings.create({model: "m", input: Array.from({length: 8}, (_, i) => `text number ${i}`), encoding_format: "float"})
        ]);
        assert.equal(chat.usage?.completion_tokens, 16);
        assert.equal(embeddings.data.length, 8);
        const alias = await fetch(`${api.openai.baseURL.replace(/\/v1$/, "")}/embeddings`, {method: "POST", body: JSON.stringify({input: "hi"})});
        assert.equal(alias.status, 200);
    });

    test("the monitoring proxy in front of it counts embeddings requests and their prompt tokens (OpenAI's and Ollama's)", async () => {
        const manager = new StatsManager({tickIntervalMs: 0});
        manager.onEngineState("ready");
        const proxy = await MonitoringProxy.listen({upstream: api.openai.baseURL.replace(/\/v1$/, ""), stats: new ProxyStats(manager)});
        try {
            const viaProxy = new OpenAI({baseURL: `${proxy.url}/v1`, apiKey: "none", maxRetries: 0});
            const openai = await viaProxy.embeddings.create({model: "m", input: texts});
            const ollama = await new Ollama({host: proxy.url}).embed({model: "m", input: texts[0]!});
            const counters = manager.counters();
            assert.equal(counters.requests.completed, 2);
            assert.equal(counters.promptTokens, openai.usage.prompt_tokens + ollama.prompt_eval_count);
            assert.equal(counters.generationTokens, 0);
        } finally {
            await proxy.close();
        }
    });
});
