/**
 * webview/protocol.ts: both directions' validators accept every well-formed message (built from a
 * real StatsManager's snapshot and deltas) and refuse malformed ones with PanelProtocolError.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {
    DeltaMessage, ErrorMessage, ExportMessage, ExportResultMessage, PanelProtocolError, PausedMessage, ReadyMessage, RequestSnapshotMessage, SelectSourceMessage, SourcesMessage,
    ResetMessage, SetPausedMessage, SnapshotMessage, encodeMessage, maxPanelMessageBytes, panelProtocolVersion, parseHostToPanel,
    parsePanelToHost, type HostToPanel
} from "../../protocol/panelMessages.js";
import type {StatsDelta, StatsSnapshotView} from "../../protocol/statsView.js";
import {fakeStats} from "./statsFixtures.js";

function realStats(): {snapshot: StatsSnapshotView, deltas: StatsDelta[]} {
    const stats = fakeStats();
    const deltas: StatsDelta[] = [];
    stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
    for (let i = 0; i < 5; i++) {
        stats.runRequest(`req-${i}`, {preempt: i === 2, fail: i === 4, client: i % 2 === 0 ? "curl" : "openai-js", cachedTokens: i});
        stats.advance(1000);
    }
    stats.manager.reset();
    stats.runRequest("after-reset", {cachedTokens: 6});
    stats.advance(1000);
    return {snapshot: stats.manager.snapshot(), deltas};
}

const clone = <T>(value: T): T => structuredClone(value);

function rejects(parse: (value: unknown) => unknown, value: unknown, pattern?: RegExp): void {
    assert.throws(() => parse(value), (error: unknown) => {
        assert.ok(error instanceof PanelProtocolError, `expected PanelProtocolError, got ${String(error)}`);
        assert.equal(error.name, "PanelProtocolError");
        if (pattern !== undefined)
            assert.match(error.message, pattern);
        return true;
    });
}

/** A watched llama.cpp server's view whose replica lists `slots`. */
function watchedWithSlots(slots: unknown): unknown {
    return {replicas: [{name: "http://a", url: "http://a", kind: "llamacpp", model: null, version: null, status: "up", since: 0, error: null,
        running: 1, waiting: 0, kvCacheUsage: 0.1, vramUsedBytes: null, slots}], notReported: [], estimated: {}, notes: []};
}

describe("host → panel", () => {
    const {snapshot, deltas} = realStats();

    test("accepts a real snapshot, as an object and as JSON text, unchanged", () => {
        const message = SnapshotMessage.create({snapshot, seq: 0, engineStartedAt: snapshot.t - 5000});
        assert.deepEqual(parseHostToPanel(message), message);
        assert.deepEqual(parseHostToPanel(encodeMessage(message)), JSON.parse(encodeMessage(message)));
        assert.ok(snapshot.requests.length > 0 && snapshot.timeSeries.length > 0);
        assert.ok(snapshot.clients.length > 0);
        assert.ok(snapshot.counters.prefixCacheHits > 0 && snapshot.gauges.prefixCacheHitRate > 0);
    });

    test("accepts every real delta, including the reset one", () => {
        assert.ok(deltas.length >= 5, `only ${deltas.length} deltas`);
        assert.ok(deltas.some((delta) => delta.reset !== undefined), "no reset delta");
        assert.ok(deltas.some((delta) => delta.requests !== undefined && delta.timeSeries !== undefined));
        assert.ok(deltas.some((delta) => delta.clients?.some((row) => row.client === "openai-js" && row.failed === 0 && row.ttftP50S !== null)));
        for (const delta of deltas)
            assert.deepEqual(parseHostToPanel(encodeMessage(DeltaMessage.create({delta}))), JSON.parse(encodeMessage(DeltaMessage.create({delta}))));
    });

    test("accepts paused, exportResult and error", () => {
        const messages: HostToPanel[] = [
            PausedMessage.create({paused: true}),
            ExportResultMessage.create({format: "csv", fileName: "x.csv", mimeType: "text/csv", content: "a,b\r\n"}),
            ExportResultMessage.create({format: "json", fileName: "x.json", mimeType: "application/json", savedTo: "/tmp/x.json"}),
            ErrorMessage.create({message: "export failed"}),
            SourcesMessage.create({sources: [{key: "merged", label: "All 2 servers (merged)"}, {key: "http://a:8000", label: "http://a:8000"}],
                selected: "merged"})
        ];
        for (const message of messages)
            assert.deepEqual(parseHostToPanel(message), message);
        rejects(parseHostToPanel, {type: "sources", sources: [{key: "x"}], selected: "x"}, /label/);
        rejects(parseHostToPanel, {type: "sources", sources: Array.from({length: 65}, (_, i) => ({key: String(i), label: "s"})), selected: "0"});
    });

    test("rejects malformed messages", () => {
        const bad: Array<[unknown, RegExp?]> = [
            ["not json", /not JSON/],
            [null, /expected an object/],
            [[], /expected an object/],
            [{type: "nope"}, /unknown message type/],
            [{type: "ready", protocolVersion: 1}, /unknown message type/],
            [{type: "snapshot", seq: 0}, /snapshot/],
            [{type: "snapshot", snapshot, seq: -1}, /seq/],
            [{type: "snapshot", snapshot, seq: 1.5}, /seq/],
            [{type: "snapshot", snapshot: {...clone(snapshot), state: "exploded"}, seq: 0}, /state/],
            [{type: "snapshot", snapshot: {...clone(snapshot), gauges: {...snapshot.gauges, running: "3"}}, seq: 0}, /gauges\.running/],
            [{type: "snapshot", snapshot: {...clone(snapshot), gauges: {...snapshot.gauges, prefixCacheHitRate: undefined}}, seq: 0},
                /gauges\.prefixCacheHitRate/],
            [{type: "snapshot", snapshot: {...clone(snapshot), counters: {...snapshot.counters, prefixCacheHits: "9"}}, seq: 0},
                /counters\.prefixCacheHits/],
            [{type: "snapshot", snapshot: {...clone(snapshot), counters: {...snapshot.counters, prefixCacheQueries: undefined}}, seq: 0},
                /counters\.prefixCacheQueries/],
            [{type: "snapshot", snapshot: {...clone(snapshot), requests: [{...snapshot.requests[0], cachedTokens: undefined}]}, seq: 0},
                /requests\[0\]\.cachedTokens/],
            [{type: "snapshot", snapshot: {...clone(snapshot), timeSeries: [{t: 1}]}, seq: 0}, /timeSeries\[0\]/],
            [{type: "snapshot", snapshot: {...clone(snapshot), requests: [{...snapshot.requests[0], arrival: null}]}, seq: 0}, /requests\[0\]\.arrival/],
            [{type: "snapshot", snapshot: {...clone(snapshot), percentiles: {...snapshot.percentiles, bogus: snapshot.percentiles.ttft}}, seq: 0}, /unknown metric/],
            [{type: "snapshot", snapshot: {...clone(snapshot), histograms: {...snapshot.histograms, ttft: {...snapshot.histograms.ttft, counts: [1]}}}, seq: 0}, /counts\.length/],
            [{type: "snapshot", snapshot: {...clone(snapshot), engine: {pid: 1}}, seq: 0}, /engine/],
            [{type: "snapshot", snapshot: {...clone(snapshot), clients: undefined}, seq: 0}, /clients: expected an array/],
            [{type: "snapshot", snapshot: {...clone(snapshot), clients: [{...snapshot.clients[0], arrived: "2"}]}, seq: 0}, /clients\[0\]\.arrived/],
            [{type: "snapshot", snapshot: {...clone(snapshot), clients: [{...snapshot.clients[0], inFlight: -1}]}, seq: 0}, /clients\[0\]\.inFlight: expected >= 0/],
            [{type: "snapshot", snapshot: {...clone(snapshot), clients: [{...snapshot.clients[0], client: "x".repeat(65)}]}, seq: 0}, /clients\[0\]\.client: longer/],
            [{type: "snapshot", snapshot: {...clone(snapshot), clients: Array.from({length: 34}, () => snapshot.clients[0])}, seq: 0}, /clients: more than 33/],
            [{type: "delta"}, /delta/],
            [{type: "delta", delta: {t: 1, seq: "2"}}, /seq/],
            [{type: "delta", delta: {t: 1, seq: 2, gauges: {running: Number.NaN}}}, /running/],
            [{type: "delta", delta: {t: 1, seq: 2, gauges: {prefixCacheHitRate: "high"}}}, /prefixCacheHitRate/],
            [{type: "delta", delta: {t: 1, seq: 2, counters: {prefixCacheQueries: null}}}, /prefixCacheQueries/],
            [{type: "delta", delta: {t: 1, seq: 2, counters: {requests: {arrived: 1}}}}, /requests/],
            [{type: "delta", delta: {t: 1, seq: 2, timeSeries: "points"}}, /timeSeries/],
            [{type: "delta", delta: {t: 1, seq: 2, clients: [{client: "curl"}]}}, /clients\[0\]\.arrived/],
            [{type: "delta", delta: {t: 1, seq: 2, clients: [{...snapshot.clients[0], ttftP50S: "fast"}]}}, /clients\[0\]\.ttftP50S/],
            [{type: "delta", delta: {t: 1, seq: 2, clients: {curl: snapshot.clients[0]}}}, /clients: expected an array/],
            [{type: "delta", delta: {t: 1, seq: 2, reset: {}}}, /reset/],
            [{type: "delta", delta: {t: 1, seq: 2, target: watchedWithSlots([{processing: "yes", tokens: 1, contextSize: 8}])}},
                /target\.replicas\[0\]\.slots\[0\]\.processing/],
            [{type: "delta", delta: {t: 1, seq: 2, target: watchedWithSlots([{processing: true, tokens: "1", contextSize: 8}])}},
                /slots\[0\]\.tokens/],
            [{type: "delta", delta: {t: 1, seq: 2, target: watchedWithSlots({0: {}})}}, /slots: expected an array/],
            [{type: "paused", paused: "yes"}, /paused/],
            [{type: "exportResult", format: "xml", fileName: "x", mimeType: "x"}, /format/],
            [{type: "error"}, /message/]
        ];
        for (const [value, pattern] of bad)
            rejects(parseHostToPanel, value, pattern);
    });

    test("the last active period: accepted as sent or null; a snapshot without one (an older host) reads as null; malformed ones refused", () => {
        const period = snapshot.lastActive;
        assert.ok(period !== null && period.generationTokensPerS > 0, "the fixture's last request made a period");
        assert.deepEqual(parseHostToPanel(DeltaMessage.create({delta: {t: 1, seq: 2, lastActive: period}})), {type: "delta", delta: {t: 1, seq: 2, lastActive: period}});
        assert.deepEqual(parseHostToPanel(DeltaMessage.create({delta: {t: 1, seq: 2, lastActive: null}})), {type: "delta", delta: {t: 1, seq: 2, lastActive: null}});
        const older: Partial<StatsSnapshotView> = clone(snapshot);
        delete older.lastActive;
        const parsed = parseHostToPanel({type: "snapshot", snapshot: older, seq: 0});
        assert.equal(parsed.type === "snapshot" ? parsed.snapshot.lastActive : "not a snapshot", null);
        const bad: Array<[unknown, RegExp]> = [
            [{...period, generationTokensPerS: "fast"}, /lastActive\.generationTokensPerS: expected a finite number/],
            [{...period, requests: -1}, /lastActive\.requests: expected >= 0/],
            [{...period, endedAt: period.startedAt - 1}, /lastActive: ends before it starts/],
            [{...period, startedAt: undefined}, /lastActive\.startedAt/],
            ["yesterday", /lastActive: expected an object/]
        ];
        for (const [lastActive, pattern] of bad) {
            rejects(parseHostToPanel, {type: "delta", delta: {t: 1, seq: 2, lastActive}}, pattern);
            rejects(parseHostToPanel, {type: "snapshot", snapshot: {...clone(snapshot), lastActive}, seq: 0}, pattern);
        }
    });

    test("a watched server's slots are accepted as sent", () => {
        const target = watchedWithSlots([{processing: true, tokens: 12, contextSize: 2048}, {processing: false, tokens: 0, contextSize: 2048}]);
        const message = parseHostToPanel({type: "delta", delta: {t: 1, seq: 2, target}});
        assert.deepEqual(message.type === "delta" ? message.delta.target : undefined, target);
    });

    test("a partial delta with only some keys is fine", () => {
        const delta = {t: 5, seq: 3, gauges: {running: 2}, percentiles: {ttft: snapshot.percentiles.ttft}};
        assert.deepEqual(parseHostToPanel({type: "delta", delta}), {type: "delta", delta});
    });
});

describe("panel → host", () => {
    test("accepts every panel message", () => {
        const messages = [
            ReadyMessage.create({protocolVersion: panelProtocolVersion}),
            SetPausedMessage.create({paused: true}),
            SetPausedMessage.create({paused: false}),
            ResetMessage.create({}),
            ExportMessage.create({format: "json"}),
            ExportMessage.create({format: "csv"}),
            RequestSnapshotMessage.create({reason: "seqGap"}),
            SelectSourceMessage.create({key: "http://127.0.0.1:8080"})
        ];
        for (const message of messages) {
            assert.deepEqual(parsePanelToHost(message), message);
            assert.deepEqual(parsePanelToHost(encodeMessage(message)), message);
        }
    });

    test("drops unknown keys and keeps the declared ones", () => {
        assert.deepEqual(parsePanelToHost({type: "reset", extra: 1}), {type: "reset"});
    });

    test("rejects malformed messages", () => {
        const bad: Array<[unknown, RegExp?]> = [
            ["{", /not JSON/],
            [42, /expected an object/],
            [{}, /unknown message type/],
            [{type: "snapshot"}, /unknown message type/],
            [{type: "ready"}, /protocolVersion/],
            [{type: "ready", protocolVersion: -1}, /protocolVersion/],
            [{type: "setPaused"}, /paused/],
            [{type: "setPaused", paused: 1}, /paused/],
            [{type: "export", format: "pdf"}, /format/],
            [{type: "requestSnapshot", reason: "because"}, /reason/],
            [{type: "selectSource"}, /key/],
            [{type: "selectSource", key: 3}, /key/],
            [JSON.stringify({type: "reset", pad: "x".repeat(maxPanelMessageBytes)}), /longer than/]
        ];
        for (const [value, pattern] of bad)
            rejects(parsePanelToHost, value, pattern);
    });
});
