/**
 * POST /lora-adapters' queue in the engine (engine/loraScaleChanges.ts), against a context that records what it is
 * given: what is answered at once, what waits, what is applied as one change, and what a failure leaves. The real
 * engine and llama-server run it in test/api/loraAdapters.test.ts.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import type {EngineToHost} from "../../protocol/engineMessages.js";
import type {LlamaContext} from "../../engine/llamaTypes.js";
import {LoraScaleChanges} from "../../engine/loraScaleChanges.js";

type Done = Extract<EngineToHost, {type: "loraScalesSet"}>;

function setUp(failWith?: string): {changes: LoraScaleChanges, applied: number[][], replies: Done[], forgotten: () => number} {
    const applied: number[][] = [];
    const replies: Done[] = [];
    let forgotten = 0;
    const context = {
        _setLoras: (loras: Array<{filePath: string, scale: number}>): Promise<void> => {
            if (failWith !== undefined)
                return Promise.reject(new Error(failWith));
            applied.push(loras.map((lora) => lora.scale));
            return Promise.resolve();
        }
    } as unknown as LlamaContext;
    const changes = new LoraScaleChanges([{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}], {
        context, reply: (done) => replies.push(done), forgetCachedStates: () => {
            forgotten++;
            return Promise.resolve();
        }
    });
    return {changes, applied, replies, forgotten: () => forgotten};
}

test("the scales in force, or the wrong number of them, are answered at once and hold nothing", () => {
    const {changes, applied, replies, forgotten} = setUp();
    changes.submit({type: "setLoraScales", seq: 1, scales: [1, 0.5]});
    changes.submit({type: "setLoraScales", seq: 2, scales: [1]});
    assert.equal(changes.holding, false);
    assert.deepEqual(replies.map((r) => [r.seq, r.error]), [[1, undefined], [2, "expected 2 scales (one per adapter), got 1"]]);
    assert.deepEqual(applied, []);
    assert.equal(forgotten(), 0);
});

test("changes that waited together are applied as one, the last one's scales, and every one is answered", async () => {
    const {changes, applied, replies, forgotten} = setUp();
    changes.submit({type: "setLoraScales", seq: 1, scales: [0, 0]});
    changes.submit({type: "setLoraScales", seq: 2, scales: [0.25, 2]});
    assert.equal(changes.holding, true);
    assert.equal(changes.ready, true);
    assert.deepEqual(replies, []);
    const applying = changes.apply();
    assert.equal(changes.ready, false, "a second apply while one runs");
    assert.equal(changes.holding, true);
    await applying;
    assert.equal(changes.holding, false);
    assert.deepEqual(applied, [[0.25, 2]]);
    assert.equal(forgotten(), 1);
    const now = [{path: "/a.gguf", scale: 0.25}, {path: "/b.gguf", scale: 2}];
    assert.deepEqual(replies, [{type: "loraScalesSet", seq: 1, adapters: now}, {type: "loraScalesSet", seq: 2, adapters: now}]);
    // The scales now in force: answered at once.
    changes.submit({type: "setLoraScales", seq: 3, scales: [0.25, 2]});
    assert.equal(changes.holding, false);
    assert.equal(replies.length, 3);
});

test("a context that refuses the scales: the error, the adapters as they were, and the cached states forgotten all the same", async () => {
    const {changes, replies, forgotten} = setUp("bad adapter");
    changes.submit({type: "setLoraScales", seq: 7, scales: [0, 1]});
    await changes.apply();
    assert.deepEqual(replies, [{type: "loraScalesSet", seq: 7, adapters: [{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}],
        error: "could not set the LoRA scales: bad adapter"}]);
    assert.equal(forgotten(), 1);
    assert.equal(changes.holding, false);
});
