/**
 * The LoRA contracts without a model: `--lora` / `--lora-scaled` as llama-server reads them, a request's `lora` list,
 * and the adapters crossing to the engine process (options) and back (its info), validated on arrival.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {UsageError} from "../../cli/commandLine.js";
import {loraAdaptersValue} from "../../cli/engineFlags.js";
import {checkEngineOptions} from "../../protocol/engineOptions.js";
import {parseEngineOptionsJson, serializeEngineOptions} from "../../protocol/engineOptionsTransfer.js";
import {parseEngineInfo} from "../../protocol/engineMessages.js";
import {checkRequestLora, parseRequestLora} from "../../protocol/loraAdapters.js";
import {ApiRequestError} from "../../protocol/openaiFields.js";
import {readLoraAdaptersSetting} from "../../extension/vscode/loraAdaptersSetting.js";
import {engineInfo} from "../helpers/engineInfoFixture.js";

describe("LoRA adapters", () => {
    test("--lora FILE,… at scale 1, then --lora-scaled FILE:SCALE,… (a path may hold colons)", () => {
        assert.equal(loraAdaptersValue(undefined, undefined), undefined);
        assert.deepEqual(loraAdaptersValue("a.gguf, b.gguf", "C:\\lora\\c.gguf:0.25,d.gguf:-1"), [
            {path: "a.gguf", scale: 1}, {path: "b.gguf", scale: 1}, {path: "C:\\lora\\c.gguf", scale: 0.25}, {path: "d.gguf", scale: -1}
        ]);
        for (const bad of ["c.gguf", "c.gguf:", "c.gguf:x", "c.gguf:1e9", ":1"])
            assert.throws(() => loraAdaptersValue(undefined, bad), UsageError, bad);
        assert.throws(() => loraAdaptersValue("a.gguf,", undefined), /one is empty/);
    });

    test("a request's lora: scales by id, an adapter left out at 0; malformed lists and unknown ids are 400s naming the field", () => {
        const adapters = [{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}];
        assert.deepEqual(parseRequestLora([{id: 1, scale: 0.5}], adapters), [0, 0.5]);
        assert.doesNotThrow(() => checkRequestLora([{id: 0, scale: 1}, {id: 1, scale: 0.5}], adapters));
        for (const bad of [{}, [{id: 2, scale: 1}], [{id: 0}], [{id: "0", scale: 1}], [null], [{id: 0, scale: 1}]]) {
            const error = (() => {
                try {
                    checkRequestLora(bad, adapters);
                } catch (caught) {
                    return caught;
                }
                return undefined;
            })();
            assert.ok(error instanceof ApiRequestError, JSON.stringify(bad));
            assert.equal(error.status, 400);
            assert.equal(error.param, "lora");
        }
        assert.throws(() => parseRequestLora([{id: 0, scale: 1}], []), /this server has no LoRA adapters/);
    });

    test("adapters cross to the engine and back validated; bad ones are refused up front", () => {
        const loraAdapters = [{path: "/a.gguf", scale: 0.75}];
        assert.deepEqual(parseEngineOptionsJson(serializeEngineOptions({loraAdapters})).loraAdapters, loraAdapters);
        assert.throws(() => parseEngineOptionsJson(JSON.stringify({loraAdapters: [{path: "/a.gguf"}]})), /loraAdapters\[\]\.scale/);
        assert.throws(() => parseEngineOptionsJson(JSON.stringify({loraAdapters: [{path: "/a.gguf", scale: 1e6}]})), /beyond ±1000/);
        assert.deepEqual(parseEngineInfo(JSON.parse(JSON.stringify(engineInfo({loraAdapters})))).loraAdapters, loraAdapters);
        assert.throws(() => parseEngineInfo({...engineInfo(), loraAdapters: undefined}), /info\.loraAdapters/);
        assert.throws(() => checkEngineOptions({statsIntervalMs: 0, loraAdapters: [{path: "", scale: 1}]}), /path is empty/);
        assert.throws(() => checkEngineOptions({statsIntervalMs: 0, loraAdapters: [{path: "/a", scale: Number.NaN}]}), /scale must be a number/);
    });

    test("the VS Code setting: valid entries in order, scale 1 when left out, the rest left out", () => {
        assert.deepEqual(readLoraAdaptersSetting([{path: " /a.gguf "}, {path: "/b.gguf", scale: 0.5}, {path: ""}, {scale: 1}, "x",
            {path: "/c.gguf", scale: "1"}, {path: "/d.gguf", scale: 1e4}, {path: "/e.gguf", scale: -2}]),
        [{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}, {path: "/e.gguf", scale: -2}]);
        assert.deepEqual(readLoraAdaptersSetting({path: "/a.gguf"}), []);
    });
});
