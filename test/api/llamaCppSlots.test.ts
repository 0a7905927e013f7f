/**
 * llama.cpp's server's `GET /slots` on our server, against llama-server on the same model (stories260K, greedy): each
 * sequence as a slot with the fields llama-server gives, the same token counts for the same requests (the tokens a slot
 * holds, those found cached when a prompt repeats, decoded and remaining ones), busy sequences while requests run,
 * `?fail_on_no_slot=1` answering 503 when none is free, and the slot actions answered as llama-server without a save path.
 * The lifecycles record the sequence each request ran on; our own llama-server reader reads our answer, and llama-server's
 * busy slots as the tokens they hold.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {parseLlamaCppSlots, type LlamaCppSlot} from "../../protocol/llamaCppSlots.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {readLlamaCpp} from "../../extension/host/targets/llamaCppReader.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();
const suite = "llama.cpp's /slots, against llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite) || skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    const api = apiForSuite({modelPath: stories.path ?? "", contextSize: 2048, parallel: 2});
    let peer: LlamaServer | undefined;
    before(async () => {
        // llama-server's -c is the whole context, split among the slots; ours is per sequence.
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: stories.path ?? "",
            args: ["-t", "1", "-np", "2", "-c", "4096", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");

    async function slots(origin: string, query = ""): Promise<LlamaCppSlot[]> {
        const response = await fetch(`${origin}/slots${query}`);
        const text = await response.text();
        assert.equal(response.status, 200, `${origin}: ${text}`);
        return JSON.parse(text) as LlamaCppSlot[];
    }
    async function complete(origin: string, body: object): Promise<void> {
        const response = await fetch(`${origin}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({temperature: 0, ...body})});
        const text = await response.text();
        assert.equal(response.status, 200, `${origin}: ${text}`);
    }
    /** Resolves once our server has no request in flight. */
    async function idle(): Promise<void> {
        const deadline = Date.now() + 10_000;
        while (api.client.inFlightCount > 0 && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 10));
        assert.equal(api.client.inFlightCount, 0);
    }
    /** The slot that ran the latest request. */
    const latest = (list: readonly LlamaCppSlot[]): LlamaCppSlot =>
        list.filter((slot) => slot.id_task !== undefined).sort((a, b) => b.id_task! - a.id_task!)[0]!;
    /** A slot less what may differ between two servers: which slot took the request, its task number, its settings. */
    const counts = ({params: _params, id_task: _task, id: _id, ...rest}: LlamaCppSlot): Omit<LlamaCppSlot, "params" | "id_task" | "id"> => rest;

    test("each sequence is a slot with llama-server's fields, and the same counts after the same requests", async () => {
        const [mine, theirs] = [await slots(ours()), await slots(peer!.origin)];
        assert.deepEqual(mine.map((slot) => [slot.id, slot.n_ctx, slot.is_processing]), theirs.map((slot) => [slot.id, slot.n_ctx, slot.is_processing]));
        assert.equal(mine[0]!.n_ctx, 2048);

        const prompt = "Once upon a time, there was a little";
        for (const origin of [ours(), peer!.origin])
            await complete(origin, {prompt, n_predict: 8});
        const [first, theirFirst] = [latest(await slots(ours())), latest(await slots(peer!.origin))];
        // Ended: nothing running, the request's counts reset; the sequence holds the prompt and 7 of the 8 tokens.
        assert.deepEqual(counts(first), counts(theirFirst));
        assert.ok(first.n_prompt_tokens! > 8, JSON.stringify(first));
        for (const key of Object.keys(first))
            assert.ok(key in theirFirst, `llama-server has ${key}`);
        for (const key of Object.keys(first.params!))
            assert.ok(key in theirFirst.params!, `llama-server's params have ${key}`);
        for (const key of ["temperature", "top_k", "max_tokens", "n_predict", "repeat_last_n", "ignore_eos"] as const)
            assert.equal(first.params![key], theirFirst.params![key], key);
        assert.equal(Math.fround(first.params!.top_p), theirFirst.params!.top_p);
        // The samplers node-llama-cpp lacks, at llama-server's neutral defaults; the samplers applied, in llama-server's order.
        for (const key of ["typical_p", "top_n_sigma", "dynatemp_range", "dynatemp_exponent", "mirostat", "mirostat_tau", "min_keep"] as const)
            assert.equal(first.params![key], theirFirst.params![key], key);
        assert.equal(Math.fround(first.params!.mirostat_eta), theirFirst.params!.mirostat_eta);
        const theirOrder = theirFirst.params!.samplers;
        assert.deepEqual(first.params!.samplers, theirOrder.filter((name) => first.params!.samplers.includes(name)), JSON.stringify(theirOrder));

        // The same prompt again, still running while /slots is read: found cached but its last token, on both.
        const running = async (origin: string): Promise<LlamaCppSlot> => {
            const controller = new AbortController();
            const response = await fetch(`${origin}/completion`, {method: "POST", headers: {"content-type": "application/json"}, signal: controller.signal,
                body: JSON.stringify({prompt, n_predict: 400, temperature: 0, ignore_eos: true, stream: true})});
            const reader = response.body!.getReader();
            await reader.read();
            const slot = latest(await slots(origin));
            controller.abort();
            await reader.read().catch(() => undefined);
            return slot;
        };
        const [again, theirAgain] = [await running(ours()), await running(peer!.origin)];
        for (const slot of [again, theirAgain]) {
            assert.equal(slot.is_processing, true, JSON.stringify(slot));
            assert.equal(slot.next_token![0].has_next_token, true);
            assert.ok(slot.next_token![0].n_decoded >= 1);
            assert.equal(slot.next_token![0].n_remain, 400 - slot.next_token![0].n_decoded);
            // The slot holds the prompt (cached and evaluated) and the decoded tokens. llama-server counts a decoded token a moment
            // before it holds it, so its two numbers may be one apart while it runs.
            const held = slot.n_prompt_tokens_cache! + slot.n_prompt_tokens_processed! + slot.next_token![0].n_decoded;
            assert.ok(slot === again ? slot.n_prompt_tokens === held : Math.abs(slot.n_prompt_tokens! - held) <= 1, JSON.stringify(counts(slot)));
        }
        assert.equal(again.n_prompt_tokens_cache, theirAgain.n_prompt_tokens_cache, "the prompt less its last token, found cached");
        assert.equal(again.n_prompt_tokens_processed, 1);
        await idle();
    });

    test("busy sequences while requests run; fail_on_no_slot answers 503 until one is free; each request's lifecycle has its sequence", async () => {
        await idle();
        const lifecycles: RequestLifecycle[] = [];
        const stopObserving = api.client.observe({onOutputs: (step) => lifecycles.push(...step.iteration.finished)});
        const controller = new AbortController();
        const streams = [0, 1].map(async () => {
            const response = await fetch(`${ours()}/completion`, {method: "POST", headers: {"content-type": "application/json"},
                signal: controller.signal, body: JSON.stringify({prompt: "Once upon a time", n_predict: 2000, ignore_eos: true, stream: true})});
            const reader = response.body!.getReader();
            await reader.read();
            return reader;
        });
        const readers = await Promise.all(streams);
        try {
            const busy = await slots(ours());
            assert.deepEqual(busy.map((slot) => slot.is_processing), [true, true], JSON.stringify(busy.map(counts)));
            const refused = await fetch(`${ours()}/slots?fail_on_no_slot=1`);
            assert.equal(refused.status, 503);
            assert.deepEqual((await refused.json() as {error: {message: string, type: string}}).error,
                {message: "no slot available", type: "unavailable_error", param: null, code: "no_slot_available"});
            assert.deepEqual(parseLlamaCppSlots(busy).map((slot) => slot.processing), [true, true], "our llama-server reader reads it");
        } finally {
            controller.abort();
            await Promise.all(readers.map(async (reader) => await reader.read().catch(() => undefined)));
        }
        await idle();
        const free = await slots(ours(), "?fail_on_no_slot=1");
        assert.deepEqual(free.map((slot) => slot.is_processing), [false, false]);
        stopObserving();
        assert.deepEqual(lifecycles.map((lifecycle) => lifecycle.sequence).sort(), [0, 1], "the two requests ran on the two sequences");
    });

    test("watching llama-server: a busy slot's KV use is the tokens it holds (its decoded ones counted once)", async () => {
        const controller = new AbortController();
        const response = await fetch(`${peer!.origin}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            signal: controller.signal, body: JSON.stringify({prompt: "Once upon a time", n_predict: 2000, ignore_eos: true, stream: true})});
        const reader = response.body!.getReader();
        try {
            await reader.read();
            const held = async (): Promise<number> => (await slots(peer!.origin)).reduce((sum, slot) => sum + (slot.is_processing ? slot.n_prompt_tokens! : 0), 0);
            const before = await held();
            const reading = await readLlamaCpp(peer!.origin, {}, () => Promise.resolve("m"));
            const afterwards = await held();
            assert.equal(reading.running, 1);
            assert.ok(reading.kvUsedTokens! >= before && reading.kvUsedTokens! <= afterwards, `${before} ≤ ${reading.kvUsedTokens} ≤ ${afterwards}`);
        } finally {
            controller.abort();
            await reader.read().catch(() => undefined);
        }
    });

    test("id_slot runs a request on that slot, wrapping around the slots as llama-server's; -1 lets the server choose", async () => {
        const prompt = "Once upon a time, there was a big";
        for (const origin of [ours(), peer!.origin]) {
            for (const [idSlot, expected] of [[1, 1], [2, 0], [5, 1], [0, 0]] as const) {
                const response = await fetch(`${origin}/completion`, {method: "POST", headers: {"content-type": "application/json"},
                    body: JSON.stringify({prompt, n_predict: 4, temperature: 0, id_slot: idSlot})});
                const answer = await response.json() as {id_slot: number};
                assert.equal(response.status, 200, `${origin}: ${JSON.stringify(answer)}`);
                assert.equal(answer.id_slot, expected, `${origin}: id_slot ${idSlot}`);
                assert.equal(latest(await slots(origin)).id, expected, `${origin}: /slots after id_slot ${idSlot}`);
            }
            const chosen = await fetch(`${origin}/completion`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({prompt, n_predict: 4, temperature: 0, id_slot: -1})});
            assert.equal(chosen.status, 200, origin);
        }
        // Ours on its OpenAI endpoints too (llama-server reads id_slot there as well, but does not name the slot in the answer).
        await api.openai.completions.create({model: "m", prompt, max_tokens: 4, temperature: 0, id_slot: 1} as Parameters<typeof api.openai.completions.create>[0]);
        assert.equal(latest(await slots(ours())).id, 1);
        const refused = await fetch(`${ours()}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({prompt, id_slot: 1.5})});
        assert.equal(refused.status, 400);
        assert.match((await refused.json() as {error: {message: string}}).error.message, /id_slot/);
    });

    test("slot actions (save, restore, erase): 501 not supported, as llama-server without --slot-save-path", async () => {
        for (const origin of [ours(), peer!.origin]) {
            const response = await fetch(`${origin}/slots/0?action=save`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({filename: "slot.bin"})});
            assert.equal(response.status, 501, origin);
            assert.equal((await response.json() as {error: {type: string}}).error.type, "not_supported_error", origin);
        }
    });
});
