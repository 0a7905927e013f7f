/**
 * A request's own LoRA scales (GenerateRequest.loraScales, llama-server's per-request `lora`), on real node-llama-cpp
 * with a real adapter that changes the KV cache too (`attention`): each request generates what an engine started with
 * its scales generates; requests with different scales never run together (node-llama-cpp applies adapters to the
 * whole context) and keep their order; the prefix cache and the prompt cache reuse a state only for the scales it was
 * computed with; a list of the wrong length is refused.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import type {GenerateRequest} from "../../protocol/engineMessages.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";
import {writeDemoLoraAdapter} from "../helpers/loraAdapter.js";

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "im-per-request-lora-"));
const adapterPath = path.join(directory, "tiny-lora.gguf");
const greedy = {temperature: 0, maxTokens: 12, ignoreEos: true} as const;
const prompt = "Once upon a time there was a little girl who lived in a small house near the big park with her dog and her cat. " +
    "Every day she went to the park to play with her friends.";
const serverScale = 1;

describe("per-request LoRA scales", () => {
    let engine: EngineUnderTest;
    /** Greedy text for `prompt` from an engine started with each scale, no prefix reuse. */
    const reference = new Map<number, string>();

    before(async () => {
        await writeDemoLoraAdapter(adapterPath, {size: "tiny", seed: 0}, {attention: true});
        for (const scale of [serverScale, 0, 0.5]) {
            const plain = await EngineUnderTest.start({parallel: 1, prefixCache: false, loraAdapters: [{path: adapterPath, scale}]});
            try {
                reference.set(scale, (await plain.generate({prompt, ...greedy})).text);
            } finally {
                await plain.engine.dispose();
            }
        }
        assert.equal(new Set(reference.values()).size, 3, "the adapter's scales must change the tokens for this test to mean anything");
        engine = await EngineUnderTest.start({parallel: 2, promptCacheMiB: 64, loraAdapters: [{path: adapterPath, scale: serverScale}]});
    });
    after(async () => {
        await engine?.engine.dispose();
        fs.rmSync(directory, {recursive: true, force: true});
    });

    test("each request generates its scales' tokens; requests with different scales run one after the other, in order", async () => {
        const scales: Array<number | undefined> = [undefined, 0, 0.5, undefined, serverScale];
        const sent = scales.map((scale) => engine.send({prompt, ...greedy, ...scale !== undefined ? {loraScales: [scale]} : {}}));
        const outcomes = await Promise.all(sent.map((request) => request.done));
        outcomes.forEach((outcome, i) => {
            assert.equal(outcome.finished.reason, "length", outcome.finished.error);
            assert.equal(outcome.text, reference.get(scales[i] ?? serverScale), `request ${i} (scale ${scales[i] ?? "the server's"})`);
        });
        const at = (kind: "scheduled" | "finished", id: string): number => engine.events.findIndex((event) => event.kind === kind && event.id === id);
        // 0 and 1 differ, as do 1 and 2, 2 and 3: each starts once the one before it is done. 3 and 4 share the server's scale:
        // they run together, and 4, which could have run beside 0, waited its turn behind 1 and 2 (first come, first served).
        for (const i of [1, 2, 3])
            assert.ok(at("scheduled", sent[i]!.id) > at("finished", sent[i - 1]!.id), `request ${i} ran beside request ${i - 1}, whose scales differ`);
        assert.ok(at("scheduled", sent[4]!.id) > at("finished", sent[2]!.id), "request 4 went ahead of requests with other scales");
        assert.ok(at("scheduled", sent[4]!.id) < at("finished", sent[3]!.id), "requests with the same scales did not run together");
    });

    test("the prefix cache and the prompt cache reuse a state only for the scales it was computed with", async () => {
        const one = await EngineUnderTest.start({parallel: 1, promptCacheMiB: 64, loraAdapters: [{path: adapterPath, scale: serverScale}]});
        try {
            const run = async (request: Omit<GenerateRequest, "id">, scale: number): Promise<{cached: number, restored: number}> => {
                const outcome = await one.generate(request);
                assert.equal(outcome.text, reference.get(scale), `scale ${scale}`);
                return {cached: outcome.cachedTokens, restored: outcome.restoredTokens ?? -1};
            };
            await run({prompt, ...greedy}, serverScale);
            // The sequence holds the prompt computed at the server's scale: not for scale 0 (its state is saved first).
            assert.deepEqual(await run({prompt, ...greedy, loraScales: [0]}, 0), {cached: 0, restored: 0});
            // Now it holds the prompt at scale 0: the server's scale restores its own saved state instead.
            const back = await run({prompt, ...greedy}, serverScale);
            assert.ok(back.restored > 0 && back.cached === back.restored, JSON.stringify(back));
            const again = await run({prompt, ...greedy, loraScales: [0]}, 0);
            assert.ok(again.restored > 0, JSON.stringify(again));
            // The same scales as the sequence's: its tokens are reused in place.
            const same = await run({prompt, ...greedy, loraScales: [0]}, 0);
            assert.ok(same.cached > 0 && same.restored === 0, JSON.stringify(same));
        } finally {
            await one.engine.dispose();
        }
    });

    test("scales that are not one per adapter are refused", async () => {
        const refused = await engine.generate({prompt, ...greedy, loraScales: [0, 1]});
        assert.equal(refused.finished.reason, "error");
        assert.equal(refused.finished.errorCode, "invalid_request");
        assert.match(refused.finished.error ?? "", /^loraScales: expected 1 scale \(one per LoRA adapter\), got 2$/);
    });
});
