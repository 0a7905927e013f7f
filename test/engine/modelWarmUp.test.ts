/**
 * The warm-up at load (engine/modelWarmUp.ts): one real evaluation on the tiny model, and every sequence
 * free and empty afterwards, so the engine starts with the KV cache it would have had without it.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {loadModel} from "../../engine/modelLoader.js";
import {warmUpModel} from "../../engine/modelWarmUp.js";
import type {LlamaContext, LlamaContextSequence} from "../../engine/llamaTypes.js";
import {tinyModelPath} from "../helpers/testModels.js";

describe("model warm-up", () => {
    test("evaluates a token on a sequence it then gives back; loadModel leaves every sequence free and empty", async () => {
        const loaded = await loadModel({modelPath: await tinyModelPath(), threads: 1, parallel: 3, contextSize: 512, gpu: "off"}, () => undefined);
        try {
            assert.equal(loaded.context.sequencesLeft, 3, "loadModel's warm-up kept a sequence");
            // The warm-up itself, watched through the sequence it takes.
            let used: LlamaContextSequence | undefined;
            const watched = new Proxy(loaded.context, {
                get: (target, property) => property === "getSequence"
                    ? () => (used = target.getSequence())
                    : Reflect.get(target, property) as unknown
            }) as LlamaContext;
            await warmUpModel(loaded.model, watched);
            assert.ok(used !== undefined, "no sequence was taken");
            // node-llama-cpp's meter counts the evaluated token as input or output depending on its bookkeeping: one in all.
            const meter = used.tokenMeter.getState();
            assert.equal(meter.usedInputTokens + meter.usedOutputTokens, 1, `tokens evaluated: ${JSON.stringify(meter)}`);
            assert.equal(used.disposed, true);
            assert.equal(loaded.context.sequencesLeft, 3);
            const sequences = [0, 1, 2].map(() => loaded.context.getSequence());
            assert.deepEqual(sequences.map((sequence) => sequence.nextTokenIndex), [0, 0, 0]);
        } finally {
            await loaded.context.dispose();
            await loaded.model.dispose();
            await loaded.llama.dispose();
        }
    });
});
