/**
 * The panel's store (webview/store.ts) in Node, on a real StatsManager's snapshot and deltas: deltas
 * applied in order reproduce the manager's view; a seq gap, a stale delta and a reset are handled;
 * the buffers stay within their bounds whatever is pushed. Plus renderPanelHtml's CSP and escaping.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import type {StatsDelta} from "../../protocol/statsView.js";
import {BoundedSeries} from "../../webview/boundedSeries.js";
import {kpiDefinitions} from "../../webview/kpiTiles.js";
import {PanelHtmlError, makeNonce, renderPanelHtml} from "../../extension/host/panel/panelHtml.js";
import {StatsStore, storeLimits} from "../../webview/store.js";
import {fakeEngineInfo, fakeStats} from "./statsFixtures.js";

describe("StatsStore", () => {
    test("snapshot + deltas reproduce the manager's view", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        const deltas: StatsDelta[] = [];
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0});
        stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
        for (let i = 0; i < 6; i++) {
            stats.runRequest(`r${i}`, {preempt: i === 1, fail: i === 3, client: i < 4 ? "curl" : "bench"});
            stats.advance(1000);
        }
        for (const delta of deltas)
            assert.equal(store.applyDelta(delta), "applied");
        const expected = stats.manager.snapshot();
        assert.deepEqual(store.view.counters, expected.counters);
        assert.deepEqual(store.view.percentiles, expected.percentiles);
        assert.deepEqual(store.view.histograms, expected.histograms);
        assert.deepEqual(store.view.clients, expected.clients);
        assert.deepEqual(store.view.clients.map((row) => [row.client, row.arrived, row.failed]), [["curl", 4, 1], ["bench", 2, 0]]);
        assert.deepEqual(store.series.toArray(), expected.timeSeries);
        assert.deepEqual([...store.requests.values()], expected.requests);
        assert.equal(store.view.state, expected.state);
        assert.ok(expected.lastActive !== null);
        assert.deepEqual(store.view.lastActive, expected.lastActive);
    });

    test("another engine (a restart, another model) reaches the view through a delta, and the uptime starts over", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        const deltas: StatsDelta[] = [];
        const startedAt = stats.clock.now - 65_000;
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0, engineStartedAt: startedAt});
        stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
        stats.runRequest("before");
        stats.advance(1000);
        for (const delta of deltas.splice(0))
            store.applyDelta(delta);
        assert.equal(store.view.engine?.model.name, "tiny-test");
        assert.equal(store.engineStartedAt, startedAt);

        stats.manager.onEngineExit({code: 0, signal: null, description: "exit code 0"});
        stats.advance(1000);
        stats.manager.onEngineState("loading");
        stats.advance(1000);
        // in process, the new engine has the same pid
        const other = fakeEngineInfo();
        other.model = {...other.model, path: "/models/other.gguf", name: "other-model", parameterCount: 2e6};
        other.contextSize = 2048;
        stats.manager.onEngineReady(other);
        stats.manager.onEngineState("ready");
        stats.advance(1000);
        for (const delta of deltas)
            assert.equal(store.applyDelta(delta), "applied");
        const carrying = deltas.filter((delta) => delta.engine !== undefined);
        assert.equal(carrying.length, 1, "the delta after the new engine's ready carries its info, once");
        assert.equal(store.view.engine?.model.name, "other-model");
        assert.equal(store.view.engine?.contextSize, 2048);
        assert.equal(store.view.state, "idle");
        assert.equal(store.engineStartedAt, carrying[0]!.t, "the uptime counts from the new engine");
    });

    test("a gap asks for a snapshot and ignores deltas until it comes; stale deltas are skipped", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        assert.equal(store.applyDelta({t: 1, seq: 1}), "waitingForSnapshot");
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0});
        assert.equal(store.applyDelta({t: 1, seq: 1, gauges: {running: 1}}), "applied");
        assert.equal(store.applyDelta({t: 1, seq: 1, gauges: {running: 5}}), "stale");
        assert.equal(store.view.gauges.running, 1);
        assert.equal(store.applyDelta({t: 2, seq: 3}), "gap");
        assert.ok(store.awaitingSnapshot);
        assert.equal(store.applyDelta({t: 2, seq: 4}), "waitingForSnapshot");
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0});
        assert.equal(store.applyDelta({t: 3, seq: 1}), "applied");
    });

    test("a reset delta replaces everything", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        const deltas: StatsDelta[] = [];
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0});
        stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
        stats.runRequest("a");
        stats.advance(1000);
        stats.manager.reset();
        for (const delta of deltas)
            store.applyDelta(delta);
        assert.equal(store.view.counters.requests.completed, 0);
        assert.equal(store.requests.size, 0);
        assert.equal(store.series.size, 0);
    });

    test("the prefix cache tile: – before any lookup, then the manager's hit rate in %, through deltas; – again after reset", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        const tile = kpiDefinitions.find((definition) => definition.key === "prefix_cache_hit_rate")!;
        assert.equal(tile.label, "Prefix cache hit rate");
        const deltas: StatsDelta[] = [];
        store.applySnapshot({snapshot: stats.manager.snapshot(), seq: 0});
        assert.equal(tile.value(store.view), null, "no lookups yet: shown as –");
        stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
        stats.runRequest("cold");
        stats.runRequest("warm", {cachedTokens: 7});
        stats.advance(1000);
        for (const delta of deltas.splice(0))
            assert.equal(store.applyDelta(delta), "applied");
        assert.deepEqual([store.view.counters.prefixCacheQueries, store.view.counters.prefixCacheHits], [16, 7]);
        assert.equal(tile.value(store.view), 7 / 16 * 100);
        assert.deepEqual([...store.requests.values()].map((request) => [request.id, request.cachedTokens]), [["cold", 0], ["warm", 7]]);
        stats.manager.reset();
        for (const delta of deltas)
            store.applyDelta(delta);
        assert.equal(tile.value(store.view), null);
    });

    test("keeps at most 15 minutes of points and 500 requests", () => {
        const stats = fakeStats();
        const store = new StatsStore();
        const snapshot = stats.manager.snapshot();
        store.applySnapshot({snapshot, seq: 0});
        const template = {promptTokensPerS: 1, generationTokensPerS: 1, requestsPerS: 1, ttftP50S: null, ttftP99S: null, itlP50S: null,
            itlP99S: null, running: 0, waiting: 0, kvCacheUsage: 0, vramUsedBytes: 0};
        let seq = 0;
        for (let i = 1; i <= 4 * 3600; i++) { // an hour at 4 deltas a second, one point and one request each
            const t = snapshot.t + i * 250;
            store.applyDelta({t, seq: ++seq, timeSeries: [{t, ...template}], requests: [{id: `q${i}`, client: "test", phase: "finished", priority: 0, maxTokens: 1,
                arrival: t, preemptions: [], promptTokens: 1, cachedTokens: 0, generatedTokens: 1, metrics: {}}]});
            assert.ok(store.series.capacityUsed <= 2 * (storeLimits.seriesWindowMs / 250 + 1) + 64);
        }
        assert.equal(store.series.size, storeLimits.seriesWindowMs / 250 + 1);
        assert.equal(store.requests.size, storeLimits.maxRequests);
        assert.ok(store.requests.has(`q${4 * 3600}`) && !store.requests.has("q1"));
    });

    test("BoundedSeries caps the count too, and skips duplicates", () => {
        const series = new BoundedSeries<{t: number}>(1e9, 10);
        series.push(Array.from({length: 100}, (_, i) => ({t: i})));
        series.push([{t: 50}, {t: 99}]);
        assert.deepEqual(series.toArray().map((p) => p.t), [90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
        assert.deepEqual(series.since(97).map((p) => p.t), [97, 98, 99]);
    });
});

describe("renderPanelHtml", () => {
    test("nonce CSP, config as JSON that cannot break out of its script element", () => {
        const nonce = makeNonce();
        const html = renderPanelHtml({scriptUri: "https://file+.vscode-resource.vscode-cdn.net/dist/webview/panel.js?a=1&b=2",
            styleUri: "/panel.css", cspSource: "https://*.vscode-cdn.net", nonce,
            transport: {kind: "websocket", url: "ws://127.0.0.1:9/stream?x=</script><script>alert(1)</script>"}});
        assert.match(html, new RegExp(`script-src 'nonce-${nonce}'`));
        assert.match(html, /default-src 'none'; img-src https:\/\/\*\.vscode-cdn\.net data:; style-src https:\/\/\*\.vscode-cdn\.net/);
        assert.match(html, /connect-src ws:\/\/127\.0\.0\.1:9\/stream;/);
        assert.equal(html.match(/<script/g)?.length, 2, "only the config and the bundle");
        assert.ok(!html.includes("</script><script>alert"));
        assert.ok(html.includes("panel.js?a=1&amp;b=2"));
        const vscode = renderPanelHtml({scriptUri: "a.js", styleUri: "a.css", cspSource: "vscode-webview:", nonce, transport: {kind: "vscode"}});
        assert.match(vscode, /connect-src 'none'/);
        assert.match(vscode, /\{"transport":\{"kind":"vscode"\}\}/);
    });

    test("refuses a bad nonce, CSP source or URL", () => {
        const base = {scriptUri: "a.js", styleUri: "a.css", cspSource: "'self'", nonce: makeNonce(), transport: {kind: "vscode"} as const};
        assert.throws(() => renderPanelHtml({...base, nonce: "short"}), PanelHtmlError);
        assert.throws(() => renderPanelHtml({...base, cspSource: "'self'; script-src *"}), PanelHtmlError);
        assert.throws(() => renderPanelHtml({...base, transport: {kind: "websocket", url: "http://x/"}}), PanelHtmlError);
    });
});
