/**
 * The engine's own check of the sampling fields (what reaches it over IPC is checked again: a token id
 * outside the vocabulary would crash llama.cpp's sampler), and the penalty window's tokens.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import {invalidSampling, lastTokens} from "../../engine/samplingOptions.js";
import type {Token} from "../../engine/llamaTypes.js";

test("invalidSampling: accepts the documented ranges, names the field and the value otherwise", () => {
    assert.equal(invalidSampling({topK: 0, minP: 1, penalties: {repeat: 1.1, presence: -2, frequency: 2, lastTokens: -1},
        logitBias: [{token: 0, bias: -100}, {token: 99, bias: 100}]}, 100), undefined);
    const refused: Array<[Parameters<typeof invalidSampling>[0], number | undefined, RegExp]> = [
        [{topK: -1}, 100, /topK must be an integer ≥ 0, got -1/],
        [{topK: 2.5}, 100, /topK/],
        [{minP: 1.5}, 100, /minP must be in \[0, 1\], got 1.5/],
        [{minP: Number.NaN}, 100, /minP/],
        [{penalties: {repeat: 0}}, 100, /penalties.repeat must be > 0/],
        [{penalties: {presence: 2.5}}, 100, /penalties.presence must be in/],
        [{penalties: {frequency: -3}}, 100, /penalties.frequency must be in/],
        [{penalties: {lastTokens: -2}}, 100, /penalties.lastTokens/],
        [{logitBias: [{token: 100, bias: 1}]}, 100, /token 100 is not in the model's vocabulary \(ids 0 to 99\)/],
        [{logitBias: [{token: -1, bias: 1}]}, 100, /token -1/],
        [{logitBias: [{token: 5, bias: 100.5}]}, 100, /bias of token 5/],
        [{logitBias: [{token: 5, bias: 1}]}, undefined, /does not list its vocabulary/]
    ];
    for (const [fields, vocabularySize, message] of refused)
        assert.match(invalidSampling(fields, vocabularySize) ?? "accepted", message, JSON.stringify(fields));
});

test("lastTokens: the window ends at the newest output token and reaches back into the prompt", () => {
    const t = (...ids: number[]): Token[] => ids as Token[];
    assert.deepEqual(lastTokens(t(1, 2, 3), t(4, 5), 3), t(3, 4, 5));
    assert.deepEqual(lastTokens(t(1, 2, 3), t(4, 5), 2), t(4, 5));
    assert.deepEqual(lastTokens(t(1, 2, 3), t(4, 5), 10), t(1, 2, 3, 4, 5));
    assert.deepEqual(lastTokens(t(1, 2, 3), t(), 2), t(2, 3));
    assert.deepEqual(lastTokens(t(1, 2, 3), t(4), 0), t());
});
