/**
 * LoRA adapters as llama-server takes them (`--lora-scaled FILE:SCALE`, `GET /lora-adapters`, a request's `lora`),
 * against llama-server on the same model with the same adapter file: the same list, the same greedy tokens with the
 * adapter applied (which differ from the base model's), `POST /lora-adapters` changing the scales as llama-server's
 * does (applied once running requests are done, cached states forgotten), a request's own scales (`lora`) giving
 * llama-server's tokens for them, alone and beside requests with the server's, the scales in `/props` and `/slots`. Then
 * the engine's refusals of files that are not an adapter for this model, each naming the file and why.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel, type DemoModelOptions} from "../../engine/model/demoModel.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import type {LlamaCppProps} from "../../protocol/llamaCppProps.js";
import type {LlamaCppSlot} from "../../protocol/llamaCppSlots.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {writeDemoLoraAdapter} from "../helpers/loraAdapter.js";
import {testCacheDir} from "../helpers/testModels.js";

const model: DemoModelOptions = {size: "tiny", seed: 0, textOnly: true};
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "im-lora-"));
const adapterPath = path.join(directory, "demo-lora.gguf");
const scale = 0.5;
after(() => fs.rmSync(directory, {recursive: true, force: true}));

async function prepared(): Promise<string> {
    if (!fs.existsSync(adapterPath))
        await writeDemoLoraAdapter(adapterPath, model, {attention: true});
    return await ensureDemoModel({...model, cacheDir: testCacheDir});
}

async function postJson(url: string, body: unknown): Promise<{status: number, body: Record<string, unknown>}> {
    const response = await fetch(url, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    return {status: response.status, body: await response.json() as Record<string, unknown>};
}

/** Greedy tokens for a fixed prompt on llama.cpp's `/completion`. */
async function greedyTokens(origin: string, extra: Record<string, unknown> = {}): Promise<number[]> {
    const {status, body} = await postJson(`${origin}/completion`, {prompt: "Once upon a time there was", n_predict: 12, temperature: 0,
        ignore_eos: true, cache_prompt: false, return_tokens: true, ...extra});
    assert.equal(status, 200, JSON.stringify(body));
    return body.tokens as number[];
}

const suite = "LoRA adapters, against llama-server with the same adapter";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const slotDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "im-lora-slots-"));
    after(() => fs.rmSync(slotDirectory, {recursive: true, force: true}));
    const api = apiForSuite(async () => ({modelPath: await prepared(), contextSize: 512, parallel: 2, loraAdapters: [{path: adapterPath, scale}]}),
        {slotSavePath: slotDirectory});
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await prepared(),
            args: ["-t", "1", "-np", "2", "-c", "1024", "--no-webui", "--lora-scaled", `${adapterPath}:${scale}`], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");

    test("GET /lora-adapters lists the adapter as llama-server does", async () => {
        const listed = async (origin: string): Promise<Array<{id: number, path: string, scale: number}>> =>
            (await (await fetch(`${origin}/lora-adapters`)).json() as Array<{id: number, path: string, scale: number}>)
                .map(({id, path: file, scale: value}) => ({id, path: file, scale: value}));
        assert.deepEqual(await listed(ours()), [{id: 0, path: adapterPath, scale}]);
        assert.deepEqual(await listed(ours()), await listed(peer!.origin));
    });

    test("greedy tokens with the adapter are llama-server's, and not the base model's", async () => {
        const mine = await greedyTokens(ours());
        assert.deepEqual(mine, await greedyTokens(peer!.origin));
        assert.notDeepEqual(mine, await greedyTokens(peer!.origin, {lora: [{id: 0, scale: 0}]}), "the adapter changes nothing");
        // A request naming the scales the server runs with is served, on llama.cpp's routes and the OpenAI ones.
        assert.deepEqual(await greedyTokens(ours(), {lora: [{id: 0, scale}]}), mine);
        const chat = await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 2,
            ...{lora: [{id: 0, scale}]}});
        assert.equal(chat.usage?.completion_tokens, 2);
    });

    test("per-request scales give llama-server's tokens for them, also beside requests with the server's", async () => {
        const withAdapter = await greedyTokens(peer!.origin);
        // An empty list names no scales: the server's, as llama-server reads it.
        assert.deepEqual(await greedyTokens(ours(), {lora: []}), withAdapter);
        assert.deepEqual(await greedyTokens(peer!.origin, {lora: []}), withAdapter);
        for (const lora of [[{id: 0, scale: 0}], [{id: 0, scale: 2}]]) {
            const theirs = await greedyTokens(peer!.origin, {lora});
            assert.notDeepEqual(theirs, withAdapter, JSON.stringify(lora));
            // After a request at the server's scale, whose state the sequences hold: not reused for other scales.
            assert.deepEqual(await greedyTokens(ours(), {cache_prompt: true}), withAdapter);
            assert.deepEqual(await greedyTokens(ours(), {lora, cache_prompt: true}), theirs, `lora ${JSON.stringify(lora)}`);
        }
        // At once, on the OpenAI routes and llama.cpp's: each gets its own scales' tokens.
        const text = async (lora: unknown): Promise<string> => (await api.openai.completions.create({model: "m",
            prompt: "Once upon a time there was", max_tokens: 12, temperature: 0, ...lora !== undefined ? {lora} : {}})).choices[0]!.text;
        const [base, adapted, alsoBase] = await Promise.all([text([{id: 0, scale: 0}]), text(undefined), text([{id: 0, scale: 0}])]);
        assert.equal(alsoBase, base);
        assert.notEqual(adapted, base);
        assert.equal(await text([{id: 0, scale}]), adapted);
        const zero = [{id: 0, scale: 0}];
        assert.deepEqual(await Promise.all([greedyTokens(ours(), {lora: zero}), greedyTokens(ours())]),
            [await greedyTokens(peer!.origin, {lora: zero}), withAdapter]);
    });

    test("an unknown adapter id and a malformed lora are refused", async () => {
        const unknown = await postJson(`${ours()}/v1/chat/completions`, {model: "m", messages: [{role: "user", content: "Hi"}], lora: [{id: 3, scale: 1}]});
        assert.equal(unknown.status, 400);
        assert.match((unknown.body.error as {message: string}).message, /lora: 3 is not an adapter id \(this server has adapters 0 to 0/);
        assert.equal((await postJson(`${ours()}/completion`, {prompt: "Hi", lora: "all"})).status, 400);
    });

    test("POST /lora-adapters sets the scales as llama-server's does: the base model's tokens at 0, the adapter's again after", async () => {
        const withAdapter = await greedyTokens(peer!.origin);
        const base = await greedyTokens(peer!.origin, {lora: [{id: 0, scale: 0}]});
        // Our sequence holds the prompt as computed with the adapter: after the change it must not be reused.
        assert.deepEqual(await greedyTokens(ours(), {cache_prompt: true}), withAdapter);
        const listed = async (origin: string): Promise<number[]> =>
            (await (await fetch(`${origin}/lora-adapters`)).json() as Array<{scale: number}>).map((adapter) => adapter.scale);
        try {
            for (const origin of [ours(), peer!.origin])
                assert.deepEqual(await postJson(`${origin}/lora-adapters`, [{id: 0, scale: 0}]), {status: 200, body: {success: true}});
            assert.deepEqual(await listed(ours()), [0]);
            assert.deepEqual(await listed(peer!.origin), [0]);
            assert.deepEqual(await greedyTokens(peer!.origin), base);
            assert.deepEqual(await greedyTokens(ours(), {cache_prompt: true}), base, "a state computed with the old scale was reused");
            assert.deepEqual(await greedyTokens(ours()), base);
            // A request naming the old scale still gets it.
            assert.deepEqual(await greedyTokens(ours(), {lora: [{id: 0, scale}], cache_prompt: true}), withAdapter);
            assert.deepEqual(await greedyTokens(ours(), {cache_prompt: true}), base);
            // The body's refusals: not a list, an unknown id, a scale that is not a number; nothing changes.
            for (const body of [{id: 0, scale: 1}, [{id: 4, scale: 1}], [{id: 0, scale: "1"}]]) {
                const refused = await postJson(`${ours()}/lora-adapters`, body);
                assert.equal(refused.status, 400, JSON.stringify(body));
            }
            assert.match(((await postJson(`${ours()}/lora-adapters`, {})).body.error as {message: string}).message, /Request body must be an array/);
            assert.deepEqual(await listed(ours()), [0]);
        } finally {
            for (const origin of [ours(), peer!.origin])
                assert.equal((await postJson(`${origin}/lora-adapters`, [{id: 0, scale}])).status, 200);
        }
        assert.deepEqual(await listed(ours()), [scale]);
        assert.deepEqual(await greedyTokens(ours(), {cache_prompt: true}), withAdapter);
    });

    test("/props and /slots give the scales requests run with, in llama-server's `lora` field", async () => {
        const propsLora = async (origin: string): Promise<unknown> =>
            ((await (await fetch(`${origin}/props`)).json()) as LlamaCppProps).default_generation_settings.params.lora;
        const lastSlotLora = async (): Promise<unknown> => {
            const slots = await (await fetch(`${ours()}/slots`)).json() as LlamaCppSlot[];
            const last = slots.filter((slot) => slot.id_task !== undefined).sort((a, b) => b.id_task! - a.id_task!)[0];
            return last?.params?.lora;
        };
        // llama-server lists what a request named: [] by default, though it runs with its scale.
        assert.deepEqual(await propsLora(peer!.origin), []);
        assert.deepEqual(await propsLora(ours()), [{id: 0, scale}]);
        await greedyTokens(ours());
        assert.deepEqual(await lastSlotLora(), [{id: 0, scale}]);
        try {
            assert.equal((await postJson(`${ours()}/lora-adapters`, [{id: 0, scale: 0}])).status, 200);
            assert.deepEqual(await propsLora(ours()), [{id: 0, scale: 0}]);
            assert.deepEqual(await lastSlotLora(), [{id: 0, scale}], "the ended request ran with the old scale");
            await greedyTokens(ours());
            assert.deepEqual(await lastSlotLora(), [{id: 0, scale: 0}]);
            // A request's own scales, where llama-server lists what the request named.
            await greedyTokens(ours(), {lora: [{id: 0, scale: 2}]});
            assert.deepEqual(await lastSlotLora(), [{id: 0, scale: 2}]);
        } finally {
            assert.equal((await postJson(`${ours()}/lora-adapters`, [{id: 0, scale}])).status, 200);
        }
    });

    test("a change waits for the running request, which ends with the scales it started with", async () => {
        const prompt = "Once upon a time there was";
        const reference = await greedyTokens(ours(), {n_predict: 160});
        // Streamed, so the change is asked for while the request runs.
        const response = await fetch(`${ours()}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({prompt, n_predict: 160, temperature: 0, ignore_eos: true, cache_prompt: false, return_tokens: true, stream: true})});
        const reader = response.body!.getReader();
        const decoder = new TextDecoder();
        let text = decoder.decode((await reader.read()).value, {stream: true});
        const change = postJson(`${ours()}/lora-adapters`, [{id: 0, scale: 0}]).then((answer) => ({answer, at: performance.now()}));
        // A slot action on the other, free sequence waits for the change too (it would work on a state the change forgets).
        await new Promise((resolve) => setTimeout(resolve, 5));
        const erased = postJson(`${ours()}/slots/1?action=erase`, {}).then((answer) => ({...answer, at: performance.now()}));
        try {
            for (;;) {
                const chunk = await reader.read();
                if (chunk.done)
                    break;
                text += decoder.decode(chunk.value, {stream: true});
            }
            const streamEnded = performance.now();
            const {answer, at} = await change;
            assert.deepEqual(answer, {status: 200, body: {success: true}});
            assert.ok(at >= streamEnded - 5, "the change answered before the running request was done");
            const erase = await erased;
            assert.equal(erase.status, 200, JSON.stringify(erase.body));
            assert.ok(erase.at >= at, "a slot action ran while the change waited");
            const tokens = text.split("\n").filter((line) => line.startsWith("data: ")).flatMap((line) =>
                (JSON.parse(line.slice(6)) as {tokens?: number[]}).tokens ?? []);
            assert.deepEqual(tokens, reference, "the running request's tokens changed with the scales");
        } finally {
            await change;
            assert.equal((await postJson(`${ours()}/lora-adapters`, [{id: 0, scale}])).status, 200);
        }
    });
});

describe("LoRA adapter files the engine refuses", () => {
    const client = async (adapter: string): Promise<string> => {
        const engine = new EngineClient({mode: "inProcess", modelPath: await prepared(), threads: 1, contextSize: 256, parallel: 1,
            statsIntervalMs: 0, loraAdapters: [{path: adapter, scale: 1}]});
        try {
            await engine.start();
            return "started";
        } catch (error) {
            return (error as Error).message;
        } finally {
            await engine.stop();
        }
    };

    test("a missing file, the model itself, and an adapter made for another model's shapes", async () => {
        const missing = path.join(directory, "missing.gguf");
        assert.match(await client(missing), new RegExp(`LoRA adapter ${missing.replace(/[.]/g, "\\.")}: file not found`));
        assert.match(await client(await prepared()), /: not a LoRA adapter: its general\.type is (missing|"model"), not "adapter" \(is it a model\?\)/);
        const otherShape = path.join(directory, "small-lora.gguf");
        await writeDemoLoraAdapter(otherShape, {size: "small", seed: 0, textOnly: true});
        assert.match(await client(otherShape), /incorrect shape/);
    });
});
