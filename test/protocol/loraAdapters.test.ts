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
import {parseEngineInfo, parseEngineToHost, parseHostToEngine} from "../../protocol/engineMessages.js";
import {parseLoraScalesBody, parseRequestLora, requestLoraScales} from "../../protocol/loraAdapters.js";
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
        // --lora-init-without-apply: every adapter at scale 0, for POST /lora-adapters to set.
        assert.deepEqual(loraAdaptersValue("a.gguf", "b.gguf:0.5", true), [{path: "a.gguf", scale: 0}, {path: "b.gguf", scale: 0}]);
        assert.throws(() => loraAdaptersValue(undefined, undefined, true), /needs adapters/);
    });

    test("POST /lora-adapters' body: every adapter's scale (one left out: 0); a body that is not a list is llama-server's 400", () => {
        const adapters = [{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}];
        assert.deepEqual(parseLoraScalesBody([{id: 1, scale: 2}], adapters), [0, 2]);
        assert.deepEqual(parseLoraScalesBody([], adapters), [0, 0]);
        assert.throws(() => parseLoraScalesBody({id: 0, scale: 1}, adapters), (error: unknown) =>
            error instanceof ApiRequestError && error.status === 400 && /^Request body must be an array/.test(error.message));
        assert.throws(() => parseLoraScalesBody([{id: 2, scale: 1}], adapters), /body: 2 is not an adapter id/);
        assert.throws(() => parseLoraScalesBody([{id: 0, scale: "1"}], adapters), /body: adapter 0's scale must be a number/);
        // Beyond what the engine's setLoraScales takes: a 400 here, not a message the engine rejects and never answers.
        assert.throws(() => parseLoraScalesBody([{id: 0, scale: 5000}], adapters), /body: adapter 0's scale must be a number within ±1000/);
    });

    test("a request's own scales cross to the engine validated", () => {
        const request = {id: "r", prompt: "Hi", maxTokens: 2, loraScales: [0, 0.5]};
        assert.deepEqual(parseHostToEngine({type: "generate", request}), {type: "generate", request});
        for (const loraScales of [[Number.NaN], ["1"], [-2000], "x", {}])
            assert.throws(() => parseHostToEngine({type: "generate", request: {...request, loraScales}}), /request\.loraScales/,
                JSON.stringify(loraScales));
    });

    test("a scale change crosses to the engine and its answer back, validated", () => {
        assert.deepEqual(parseHostToEngine({type: "setLoraScales", seq: 3, scales: [0, 0.5]}), {type: "setLoraScales", seq: 3, scales: [0, 0.5]});
        for (const scales of [[Number.NaN], ["1"], [1e6], "x"])
            assert.throws(() => parseHostToEngine({type: "setLoraScales", seq: 3, scales}), /setLoraScales\.scales/, JSON.stringify(scales));
        const answer = {type: "loraScalesSet", seq: 3, adapters: [{path: "/a.gguf", scale: 0}]};
        assert.deepEqual(parseEngineToHost(answer), answer);
        assert.deepEqual(parseEngineToHost({...answer, error: "no"}), {...answer, error: "no"});
        assert.throws(() => parseEngineToHost({...answer, adapters: [{path: "/a.gguf"}]}), /loraScalesSet\.adapters\[\]\.scale/);
    });

    test("a request's lora: scales by id, an adapter left out at 0; malformed lists and unknown ids are 400s naming the field", () => {
        const adapters = [{path: "/a.gguf", scale: 1}, {path: "/b.gguf", scale: 0.5}];
        assert.deepEqual(parseRequestLora([{id: 1, scale: 0.5}], adapters), [0, 0.5]);
        // Other scales than the server's are the request's own (the engine runs it with them).
        assert.deepEqual(parseRequestLora([{id: 0, scale: 0.25}, {id: 1, scale: 2}], adapters), [0.25, 2]);
        assert.deepEqual(parseRequestLora([], adapters), [0, 0]);
        // As llama-server reads a request's empty list: no scales of its own, the server's.
        assert.equal(requestLoraScales([], adapters), undefined);
        assert.deepEqual(requestLoraScales([{id: 1, scale: 0}], adapters), [0, 0]);
        assert.throws(() => requestLoraScales({}, adapters), /lora: must be a list/);
        for (const bad of [{}, [{id: 2, scale: 1}], [{id: 0}], [{id: "0", scale: 1}], [null], [{id: 0, scale: 1e6}]]) {
            const error = (() => {
                try {
                    parseRequestLora(bad, adapters);
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
