/**
 * The Sequences card's rows (webview/sequencesCard.ts) from what the panel holds: our engine's running requests on
 * their sequences, and the slots of watched servers that list them.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import type {TargetReplicaView, TargetView} from "../../protocol/targetView.js";
import {engineRows, sequenceRows, targetSlotRows} from "../../webview/sequencesCard.js";

function lifecycle(id: string, fields: Partial<RequestLifecycle>): RequestLifecycle {
    return {id, client: "curl", phase: "running", priority: 0, maxTokens: 64, arrival: 0, preemptions: [], promptTokens: 10, cachedTokens: 0,
        generatedTokens: 5, metrics: {}, ...fields};
}

function replica(name: string, slots?: TargetReplicaView["slots"]): TargetReplicaView {
    return {name, url: name, kind: slots !== undefined ? "llamacpp" : "vllm", model: null, version: null, status: "up", since: 0, error: null,
        running: null, waiting: null, kvCacheUsage: null, vramUsedBytes: null, ...slots !== undefined ? {slots} : {}};
}

describe("the Sequences card's rows", () => {
    test("our engine: the running request on each sequence, the tokens it holds of the context (a prompt in chunks: so far); " +
        "finished ones leave it free", () => {
        const rows = sequenceRows([
            lifecycle("a", {sequence: 1}),
            lifecycle("b", {sequence: 2, phase: "finished"}),
            lifecycle("c", {sequence: 3, promptTokens: 100, generatedTokens: 28}),
            lifecycle("d", {phase: "waiting"}),
            lifecycle("e", {sequence: 0, promptTokens: 100, generatedTokens: 0, prefilledTokens: 32})
        ], 4, 128);
        assert.deepEqual(rows, [
            {sequence: 0, request: {id: "e", client: "curl", tokens: 32, fraction: 32 / 128, prefill: {processed: 32, total: 100}}},
            {sequence: 1, request: {id: "a", client: "curl", tokens: 15, fraction: 15 / 128}},
            {sequence: 2},
            {sequence: 3, request: {id: "c", client: "curl", tokens: 128, fraction: 1}}
        ]);
    });

    test("as shown: the client, the request, the tokens held; a prompt in chunks, how much of it is in", () => {
        const rows = engineRows([lifecycle("abcdef123", {sequence: 0}),
            lifecycle("fedcba987", {sequence: 1, client: "openai-js", promptTokens: 2000, generatedTokens: 0, prefilledTokens: 1024})],
        {parallel: 3, contextSize: 4096});
        assert.deepEqual(rows.map(({label, busy, text}) => [label, busy, text]), [
            ["#0", true, "curl · abcdef · 15 / 4096 tokens"],
            ["#1", true, "openai-js · fedcba · prompt 1024 / 2000 evaluated"],
            ["#2", false, "free"]]);
        assert.equal(rows[1]!.fraction, 1024 / 4096);
    });

    test("watched servers: the slots of those that list them, named by server when there are several", () => {
        const one: TargetView = {replicas: [replica("http://a", [{processing: true, tokens: 512, contextSize: 2048}, {processing: false, tokens: 90, contextSize: 2048}]),
            replica("http://v")], notReported: [], estimated: {}, notes: []};
        assert.deepEqual(targetSlotRows(one).map(({label, busy, fraction, text}) => [label, busy, fraction, text]), [
            ["#0", true, 0.25, "busy · 512 / 2048 tokens"], ["#1", false, 0, "free"]]);
        const two: TargetView = {...one, replicas: [...one.replicas, replica("http://b", [{processing: false, tokens: 0, contextSize: 4096}])]};
        assert.deepEqual(targetSlotRows(two).map((row) => row.label), ["http://a #0", "http://a #1", "http://b #0"]);
        assert.deepEqual(targetSlotRows({...one, replicas: [replica("http://v")]}), [], "no server lists slots: no rows (the card hides)");
    });
});
