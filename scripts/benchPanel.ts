/**
 * `npm run bench:panel -- [--minutes N] [--live-seconds S] [--json FILE]`
 *
 * The stats panel page under scale, in real headless Chromium (Debian's, launched as the panel tests
 * do): a real StatsManager fed synthetic engine steps through the real OutputProcessor (4 sequences
 * decoding, a token each every 20 ms, requests arriving, queueing, finishing, a few aborted), served by
 * the real DashboardServer, the page open at its URL with the 15-minute window selected and a viewport
 * tall enough to show every chart.
 *
 * Setup: a simulated clock fills the manager with 16 minutes of that traffic in a few seconds (a full
 * ledger of 500 requests, 960 one-second time-series points), then becomes the real clock.
 *
 * 1. Latency (issue F: p99 ≤ 300 ms): for S seconds (default 60) traffic flows at real time and a 250 ms
 *    tick (what the manager's own timer does) sends deltas at the panel's 4 Hz. Per delta: host send (the
 *    manager hands it to the dashboard's session, which encodes it onto the socket) → the page's message
 *    handler → the animation frame whose callbacks ran the panel's render (KPIs, tables, every chart
 *    updated) → the start of the next frame (the updated pixels were produced). Page times are put on
 *    the host clock by an offset measured with round trips (the smallest one's half is the uncertainty).
 * 2. Memory (issue F: page JS heap within +10 MB, host RSS flat): N simulated minutes (default 30) of
 *    4 Hz deltas, each carrying 250 ms of simulated traffic, in accelerated time: the next delta goes
 *    once the page has applied and rendered the previous one. Page JS heap through the DevTools protocol
 *    (HeapProfiler.collectGarbage, Runtime.getHeapUsage) and host RSS after gc() (`node --expose-gc`) at
 *    the start (after a 30 s warm-up), at every fifth of the run and at the end. "Flat" is read as at
 *    most +10 MB, the page's allowance. The host's young generation is fixed at V8's default maximum
 *    (`--min-semi-space-size=16`, 16 MB semi-spaces, as npm run bench:panel runs it): by default it starts
 *    at 1 MB and V8 grows it to 2 × 16 MB under allocation, a one-time +32 MB of RSS in the first minutes
 *    (measured 2026-12-04: new_space 33.6 MB from 2 simulated minutes on) that is GC sizing, not retention.
 *    Each point prints V8's spaces, so that growth stays visible when the bench runs without the flag.
 *
 * The page is measured without page code of its own: the bench wraps the panel's public `receive`
 * (through the debug handle `window.__inferenceMonitorPanel`; the transport calls it for every
 * message) to time-stamp each applied delta and ask for the next animation frame. The panel asked for its
 * render frame when it applied the delta, before that, so the bench's callback runs after the render
 * in the same frame; the render counter checks it did. A benchmark, not a test: the targets print PASS or
 * FAIL. But it fails (exit 1) when the page did not get or draw the data: deltas missing, a seq gap,
 * rejected messages, console errors, a chart without ink, or the page's numbers not the manager's.
 */
import fs from "node:fs";
import v8 from "node:v8";
import type {CDPSession, Page} from "playwright-core";
import {UsageError} from "../cli/commandLine.js";
import {positiveNumberValue} from "../cli/optionValues.js";
import {nowMs} from "../common/clock.js";
import {nextUnit, Xoshiro128} from "../common/seededRandom.js";
import {DashboardServer, type DashboardStatsSource} from "../extension/host/dashboard/dashboardServer.js";
import {OutputProcessor} from "../extension/host/engineClient/outputProcessor.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {StatsManager} from "../extension/host/stats/statsManager.js";
import type {EngineInfo, RequestEvent} from "../protocol/engineMessages.js";
import type {StatsDelta} from "../protocol/statsView.js";
import {chromiumPath, launchChromium, type LaunchedBrowser} from "../test/webview/chromium.js";
import {ensurePanelBuilt, webviewDistDir} from "../test/webview/panelBuild.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";

const flags = readScriptCommandLine({
    name: "bench:panel",
    summary: "the stats panel at scale in headless Chromium: delta → painted latency, then the page's JS heap and the host's RSS",
    options: {
        "minutes": {type: "string", placeholder: "N", description: "simulated minutes of 4 Hz deltas for the memory check (default 30)"},
        "live-seconds": {type: "string", placeholder: "S", description: "real-time seconds of traffic for the latency check, at least 5 (default 60)"},
        "json": {type: "string", placeholder: "FILE", description: "also write the results to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Commands\") and this script's header. Needs Debian's chromium " +
        "(bash .ci/install-e2e.sh); run it as npm run bench:panel does, with node --expose-gc --min-semi-space-size=16."
}, (values) => {
    const live = values["live-seconds"];
    const liveSeconds = live === undefined ? 60 : live.trim() === "" ? NaN : Number(live);
    if (!(Number.isFinite(liveSeconds) && liveSeconds >= 5))
        throw new UsageError(`--live-seconds must be a number >= 5, got ${JSON.stringify(live)}`);
    return {minutes: positiveNumberValue("minutes", values.minutes, 30), liveSeconds, json: values.json};
});

const stepMs = 20;
const deltaMs = 250;
const parallel = 4;
const fillMinutes = 16;
const warmUpDeltas = 120;
const latencyTargetMs = 300;
const heapTargetBytes = 10e6;
const rssTargetBytes = 10e6;
const clientLabels = ["openai-js", "curl", "Continue", "Cline"];
const chartNames = ["throughput", "latency", "requests", "cache", "histograms", "timeline"];

const info: EngineInfo = {
    pid: process.pid, backend: "cpu", gpuDevices: [], gpuFallbacks: [], vramTotalBytes: 0, vramUsedBytes: 0,
    model: {path: "/bench/model.gguf", name: "bench-panel", architecture: "llama", parameterCount: 2e7, quantization: "F16", sizeBytes: 4e7,
        trainContextLength: 8192},
    contextSize: 8192, parallel, threads: 1, prefixCache: true, tilePadding: false, promptCacheMiB: 0, prefillChunkTokens: 128,
    loraAdapters: [], statsIntervalMs: 1000, loadMs: 1
};

/** What the bench installs in the page (see the file comment). Times are epoch ms on the page's clock. */
type DeltaTiming = {seq: number, receivedAt: number, frameStart: number, renderedAt: number, paintedAt: number, rendered: boolean};
type PanelProbe = {
    measuring: boolean,
    timings: DeltaTiming[],
    /** Resolves true once the page holds delta `seq` and a frame (with its render) has run since; false after `timeoutMs`. */
    waitRendered(seq: number, timeoutMs: number): Promise<boolean>
};

declare global {
    interface Window {
        __benchPanelProbe?: PanelProbe
    }
}

/** The manager's clock: simulated (set by the bench) while filling and in the memory run, the real one while live; never backwards. */
class BenchClock {
    private simulated: number | undefined;
    private last = 0;

    constructor(start: number) {
        this.simulated = start;
    }

    now(): number {
        this.last = Math.max(this.last, this.simulated ?? nowMs());
        return this.last;
    }

    simulate(t: number): void {
        this.simulated = Math.max(t, this.now());
    }

    /** Moves a simulated clock to `t` (each step's time while simulating); the real clock is left alone. */
    follow(t: number): void {
        if (this.simulated !== undefined)
            this.simulate(t);
    }

    real(): void {
        this.simulated = undefined;
    }
}

type LiveRequest = {id: string, promptTokens: number, outputLen: number, generated: number};

/**
 * Engine steps every 20 ms of the manager's clock, through the real OutputProcessor: about 3 arrivals a
 * second (at most 12 waiting), 4 sequences, 16–96 output tokens (each up to 6 ms before its step), some
 * prompts partly cached, about 1 in 50 aborted. A simulated clock follows the steps.
 */
class Traffic {
    readonly processor = new OutputProcessor();
    finished = 0;
    tokens = 0;
    steps = 0;
    private readonly rng = new Xoshiro128(20240611);
    private readonly waiting: LiveRequest[] = [];
    private readonly running: LiveRequest[] = [];
    private nextId = 0;
    private nextStepAt: number;

    constructor(private readonly manager: StatsManager, private readonly clock: BenchClock, startAt: number) {
        this.nextStepAt = startAt + stepMs;
    }

    /** Runs every step due up to `t`. */
    runUntil(t: number): void {
        for (; this.nextStepAt <= t; this.nextStepAt += stepMs) {
            this.clock.follow(this.nextStepAt);
            this.step(this.nextStepAt);
        }
    }

    private int(lo: number, hi: number): number {
        return lo + Math.floor(nextUnit(this.rng) * (hi - lo + 1));
    }

    private step(t: number): void {
        const events: RequestEvent[] = [];
        if (nextUnit(this.rng) < 3 * stepMs / 1000 && this.waiting.length < 12) {
            const request = {id: `req-${this.nextId++}`, promptTokens: this.int(32, 512), outputLen: this.int(16, 96), generated: 0};
            const client = clientLabels[this.int(0, clientLabels.length - 1)]!;
            this.manager.onOutputs(this.processor.arrive(request.id, client, t, 0, request.outputLen));
            events.push({kind: "inputProcessed", id: request.id, t, promptTokens: request.promptTokens}, {kind: "queued", id: request.id,
                t});
            this.waiting.push(request);
        }
        for (let i = 0; i < this.running.length; i++) {
            // scheduled in an earlier step (this step's are added below): its prefill is done
            const request = this.running[i]!;
            request.generated++;
            this.tokens++;
            events.push({kind: "tokens", id: request.id, text: " tok", times: [t - this.int(0, 6)]});
            const abort = nextUnit(this.rng) < 0.02 / 50;
            if (request.generated >= request.outputLen || abort) {
                events.push({kind: "finished", id: request.id, t, reason: abort ? "abort" : "length", promptTokens: request.promptTokens,
                    generatedTokens: request.generated});
                this.running.splice(i--, 1);
                this.finished++;
            }
        }
        let prefillTokens = 0;
        while (this.running.length < parallel && this.waiting.length > 0) {
            const request = this.waiting.shift()!;
            const cachedTokens = nextUnit(this.rng) < 0.3 ? Math.floor(request.promptTokens / 2) : 0;
            prefillTokens += request.promptTokens - cachedTokens;
            events.push({kind: "scheduled", id: request.id, t, cachedTokens});
            this.running.push(request);
        }
        const kvUsedTokens = this.running.reduce((sum, request) => sum + request.promptTokens + request.generated, 0);
        const {step, unknownIds} = this.processor.process(events, {t, running: this.running.length, waiting: this.waiting.length,
            stepTokens: this.running.length + prefillTokens, kvUsedTokens, kvCapacityTokens: info.contextSize}, 0, t);
        if (unknownIds.length > 0)
            throw new Error(`the bench's traffic sent events for unknown requests: ${unknownIds.join(", ")}`);
        this.manager.onOutputs(step);
        this.steps++;
    }
}

/** The manager as the dashboard's source, noting when each delta is handed to the page's session. */
class DeltaTap {
    subscriptions = 0;
    sent = 0;
    lastSeq = 0;
    recording = false;
    readonly sentAt = new Map<number, number>();
    deltaBytes = 0;

    constructor(private readonly manager: StatsManager) {}

    source(): DashboardStatsSource {
        return {
            snapshot: () => this.manager.snapshot(),
            reset: () => this.manager.reset(),
            subscribe: (listener, options) => {
                this.subscriptions++;
                return this.manager.subscribe((delta: StatsDelta) => {
                    const at = nowMs();
                    listener(delta);
                    this.sent++;
                    this.lastSeq = delta.seq;
                    if (this.recording) {
                        this.sentAt.set(delta.seq, at);
                        this.deltaBytes += JSON.stringify(delta).length;
                    }
                }, options);
            }
        };
    }
}

type Stats = {count: number, p50: number, p99: number, max: number};

function stats(values: number[]): Stats {
    return {count: values.length, p50: percentile(values, 50), p99: percentile(values, 99),
        max: values.length === 0 ? 0 : Math.max(...values)};
}

function check(condition: boolean, message: string): void {
    if (!condition)
        throw new Error(`bench:panel: ${message}`);
}

async function sleep(ms: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Page clock − host clock, from the round trip with the least delay; its half is the uncertainty. */
async function clockOffset(page: Page): Promise<{offsetMs: number, uncertaintyMs: number}> {
    let best = {offsetMs: 0, uncertaintyMs: Number.POSITIVE_INFINITY};
    for (let i = 0; i < 30; i++) {
        const before = nowMs();
        const pageNow = await page.evaluate(() => performance.timeOrigin + performance.now());
        const after = nowMs();
        if ((after - before) / 2 < best.uncertaintyMs)
            best = {offsetMs: pageNow - (before + after) / 2, uncertaintyMs: (after - before) / 2};
    }
    return best;
}

/** Installs the probe (see the file comment). */
async function installProbe(page: Page): Promise<void> {
    await page.evaluate(() => {
        const app = window.__inferenceMonitorPanel!.app;
        const clock = (): number => performance.timeOrigin + performance.now();
        const probe: PanelProbe = {
            measuring: false,
            timings: [],
            waitRendered: (seq, timeoutMs) => new Promise((resolve) => {
                const deadline = performance.now() + timeoutMs;
                const poll = (): void => {
                    // Applied before this frame: the panel's render was asked for first, so it has run when the next callback does.
                    if (app.store.seq >= seq)
                        requestAnimationFrame(() => resolve(true));
                    else if (performance.now() > deadline)
                        resolve(false);
                    else
                        requestAnimationFrame(poll);
                };
                poll();
            })
        };
        const receive = app.receive.bind(app);
        app.receive = (raw: unknown): void => {
            const receivedAt = clock();
            const seqBefore = app.store.seq;
            const rendersBefore = app.counters.renders;
            receive(raw);
            if (!probe.measuring || app.store.seq === seqBefore)
                return;
            const timing: DeltaTiming = {seq: app.store.seq, receivedAt, frameStart: Number.NaN, renderedAt: Number.NaN,
                paintedAt: Number.NaN, rendered: false};
            probe.timings.push(timing);
            requestAnimationFrame((frameStart) => {
                timing.frameStart = performance.timeOrigin + frameStart;
                timing.renderedAt = clock();
                timing.rendered = app.counters.renders > rendersBefore;
                requestAnimationFrame(() => {
                    timing.paintedAt = clock();
                });
            });
        };
        window.__benchPanelProbe = probe;
    });
}

type PageState = {
    seq: number, received: number, rejected: number, gaps: number, renders: number, seriesPoints: number, seriesSpanS: number,
    seriesBacking: number, requests: number, timelineRows: number, clientRows: number, completedTile: number | null,
    chartInk: Record<string, number>
};

/** What the page holds and shows; `chartInk`: the share of each chart's canvas pixels drawn. */
async function pageState(page: Page): Promise<PageState> {
    return await page.evaluate((charts) => {
        const app = window.__inferenceMonitorPanel!.app;
        const points = app.store.series.toArray();
        const chartInk: Record<string, number> = {};
        for (const name of charts) {
            const canvas = document.querySelector<HTMLCanvasElement>(`canvas[data-chart="${name}"]`);
            if (canvas === null || canvas.width === 0 || canvas.height === 0) {
                chartInk[name] = 0;
                continue;
            }
            // a copy: reading the chart's own canvas back would make Chromium warn
            const copy = document.createElement("canvas");
            copy.width = canvas.width;
            copy.height = canvas.height;
            const context = copy.getContext("2d", {willReadFrequently: true})!;
            context.drawImage(canvas, 0, 0);
            const {data} = context.getImageData(0, 0, copy.width, copy.height);
            let drawn = 0;
            for (let i = 3; i < data.length; i += 4)
                if (data[i]! > 0)
                    drawn++;
            chartInk[name] = drawn / (data.length / 4);
        }
        const completed = document.querySelector<HTMLElement>('[data-metric="completed"]')?.dataset.value;
        return {
            seq: app.store.seq, received: app.counters.received, rejected: app.counters.rejected, gaps: app.counters.gaps,
            renders: app.counters.renders,
            seriesPoints: points.length, seriesSpanS: points.length < 2 ? 0 : (points[points.length - 1]!.t - points[0]!.t) / 1000,
            seriesBacking: app.store.series.capacityUsed, requests: app.store.requests.size, timelineRows: app.timeline.shownRows.length,
            clientRows: document.querySelectorAll("[data-card=clients] tbody tr").length,
            completedTile: completed === undefined || completed === "" ? null : Number(completed), chartInk
        };
    }, chartNames);
}

/** The page shows the manager's state: everything there, drawn, and the completed count exact (the manager must be quiet). */
function checkPage(state: PageState, manager: StatsManager, when: string): void {
    check(state.rejected === 0, `${when}: the page rejected ${state.rejected} messages`);
    check(state.gaps === 0, `${when}: the page saw ${state.gaps} seq gaps`);
    check(state.requests === 500, `${when}: the page holds ${state.requests} requests, not 500`);
    check(state.seriesPoints >= 890 && state.seriesSpanS >= 14.5 * 60,
        `${when}: the page holds ${state.seriesPoints} points over ${state.seriesSpanS} s`);
    check(state.timelineRows === 50, `${when}: the timeline shows ${state.timelineRows} rows, not 50`);
    check(state.clientRows === clientLabels.length, `${when}: the clients table has ${state.clientRows} rows, not ${clientLabels.length}`);
    for (const name of chartNames)
        check(state.chartInk[name]! > 0.01,
            `${when}: chart ${name} has ${((state.chartInk[name] ?? 0) * 100).toFixed(2)}% of its pixels drawn`);
    const completed = manager.counters().requests.completed;
    check(state.completedTile === completed, `${when}: the page shows ${state.completedTile} completed, the manager counts ${completed}`);
}

type MemoryPoint = {
    simulated_minutes: number, deltas: number, page_heap_used_bytes: number, page_heap_total_bytes: number,
    page_embedder_heap_bytes: number,
    page_dom_nodes: number, page_js_event_listeners: number, page_series_backing: number, host_rss_bytes: number,
    /** What RSS is made of, when it grows: V8's heap as reserved, memory outside it held by JS objects, of which Buffers. */
    host_heap_total_bytes: number, host_external_bytes: number, host_array_buffers_bytes: number,
    host_heap_used_bytes: number,
    /** V8's heap by space, as reserved (`v8.getHeapSpaceStatistics`): which part of heapTotal grew. */
    host_heap_spaces_bytes: Record<string, number>
};

async function memoryPoint(cdp: CDPSession, page: Page, simulatedMinutes: number, deltas: number): Promise<MemoryPoint> {
    await cdp.send("HeapProfiler.collectGarbage");
    await cdp.send("HeapProfiler.collectGarbage");
    const heap = await cdp.send("Runtime.getHeapUsage");
    const dom = await cdp.send("Memory.getDOMCounters");
    const backing = await page.evaluate(() => window.__inferenceMonitorPanel!.app.store.series.capacityUsed);
    globalThis.gc?.();
    globalThis.gc?.();
    const host = process.memoryUsage();
    return {
        simulated_minutes: simulatedMinutes, deltas, page_heap_used_bytes: heap.usedSize, page_heap_total_bytes: heap.totalSize,
        page_embedder_heap_bytes: heap.embedderHeapUsedSize, page_dom_nodes: dom.nodes, page_js_event_listeners: dom.jsEventListeners,
        page_series_backing: backing, host_rss_bytes: host.rss, host_heap_used_bytes: host.heapUsed,
        host_heap_total_bytes: host.heapTotal, host_external_bytes: host.external, host_array_buffers_bytes: host.arrayBuffers,
        host_heap_spaces_bytes: Object.fromEntries(v8.getHeapSpaceStatistics().map((space) => [space.space_name, space.space_size]))
    };
}

const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;
const signedMb = (bytes: number): string => `${bytes >= 0 ? "+" : "−"}${mb(Math.abs(bytes))}`;
const ms = (value: number): string => `${value.toFixed(1)} ms`;
const verdict = (pass: boolean): string => pass ? "PASS" : "FAIL";

function printMemoryPoint(point: MemoryPoint): void {
    const spaces = Object.entries(point.host_heap_spaces_bytes).filter(([, bytes]) => bytes > 0).map(([name, bytes]) => `${name} ${mb(bytes)}`);
    console.log(`  ${point.simulated_minutes.toFixed(1)} min: page heap ${mb(point.page_heap_used_bytes)}, ` +
        `host RSS ${mb(point.host_rss_bytes)} (heap ${mb(point.host_heap_used_bytes)} used of ${mb(point.host_heap_total_bytes)}: ` +
        `${spaces.join(", ")}; external ${mb(point.host_external_bytes)}, of which buffers ${mb(point.host_array_buffers_bytes)})`);
}

async function main(): Promise<void> {
    const {minutes, liveSeconds} = flags;
    check(fs.existsSync(chromiumPath), `${chromiumPath} not found: install Debian's chromium (bash .ci/install-e2e.sh)`);
    if (globalThis.gc === undefined)
        console.warn("bench:panel: no gc() (run node with --expose-gc, as npm run bench:panel does): host RSS is read without a forced GC");
    if (!process.execArgv.some((arg) => arg.startsWith("--min-semi-space-size")))
        console.warn("bench:panel: the young generation is not fixed (run node with --min-semi-space-size=16, as npm run bench:panel " +
            "does): V8 growing it to its maximum adds ~32 MB of host RSS in the first minutes");
    ensurePanelBuilt();

    // ---- fill: 16 simulated minutes in a few seconds --------------------------------------------
    const fillStart = nowMs() - fillMinutes * 60_000;
    const clock = new BenchClock(fillStart);
    const manager = new StatsManager({now: () => clock.now(), tickIntervalMs: 0});
    manager.onEngineReady(info);
    manager.onEngineState("ready");
    const traffic = new Traffic(manager, clock, fillStart);
    const fillBegan = nowMs();
    for (let t = fillStart + deltaMs; t <= fillStart + fillMinutes * 60_000; t += deltaMs) {
        traffic.runUntil(t);
        clock.simulate(t);
        manager.tick();
    }
    const fillWallS = (nowMs() - fillBegan) / 1000;
    clock.real();
    const filled = manager.snapshot();
    check(filled.requests.length === 500 && filled.timeSeries.length >= 15 * 60,
        `the fill left ${filled.requests.length} requests and ${filled.timeSeries.length} points`);

    // ---- live: real-time traffic and the 250 ms tick ---------------------------------------------
    let trafficTimer: NodeJS.Timeout | undefined = setInterval(() => traffic.runUntil(clock.now()), stepMs);
    let tickTimer: NodeJS.Timeout | undefined = setInterval(() => manager.tick(), deltaMs);
    const stopTimers = (): void => {
        clearInterval(trafficTimer);
        clearInterval(tickTimer);
        trafficTimer = tickTimer = undefined;
    };
    const tap = new DeltaTap(manager);
    let server: DashboardServer | undefined;
    let browser: LaunchedBrowser | undefined;
    const problems: string[] = [];
    try {
        server = await DashboardServer.listen({port: 0, source: tap.source(), webviewDir: webviewDistDir,
            engineStartedAt: () => fillStart});
        browser = await launchChromium();
        const page = await browser.context.newPage();
        // tsx keeps function names with a __name() helper the page does not have (the code given to page.evaluate is tsx's output).
        await page.addInitScript({content: "globalThis.__name ??= (target) => target;"});
        page.on("console", (message) => {
            if (message.type() === "error")
                problems.push(`console.error: ${message.text()}`);
        });
        page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
        await page.goto(server.url);
        await page.waitForFunction(() => window.__inferenceMonitorPanel?.app.store.hasData === true, undefined, {timeout: 30_000});
        await page.selectOption('[data-action="window"]', String(15 * 60_000));
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        const viewport = {width: 1400, height: Math.min(Math.max(height, 1000), 4000)};
        await page.setViewportSize(viewport);
        await installProbe(page);
        await sleep(3000);
        const subscriptions = tap.subscriptions;
        check(subscriptions === 1, `the page subscribed ${subscriptions} times before the measurement`);

        // ---- 1. latency ---------------------------------------------------------------------------
        console.log(`bench:panel: ${liveSeconds} s of live deltas at 4 Hz…`);
        const offsetBefore = await clockOffset(page);
        tap.recording = true;
        const sentBefore = tap.sent;
        await page.evaluate(() => {
            window.__benchPanelProbe!.measuring = true;
        });
        await sleep(liveSeconds * 1000);
        await page.evaluate(() => {
            window.__benchPanelProbe!.measuring = false;
        });
        tap.recording = false;
        const liveSent = tap.sent - sentBefore;
        await sleep(500);
        const offsetAfter = await clockOffset(page);
        const offset = offsetBefore.uncertaintyMs <= offsetAfter.uncertaintyMs ? offsetBefore : offsetAfter;
        const timings = await page.evaluate(() => window.__benchPanelProbe!.timings.splice(0));
        check(tap.subscriptions === subscriptions, "the page re-subscribed (asked for a snapshot) during the measurement");
        check(liveSent >= liveSeconds * 4 * 0.8, `only ${liveSent} deltas sent in ${liveSeconds} s (4 Hz expected)`);
        check(timings.length >= liveSent - 2, `the page applied ${timings.length} of ${liveSent} deltas`);
        const matched = timings.filter((timing) => tap.sentAt.has(timing.seq));
        check(matched.length >= timings.length - 2, `${timings.length - matched.length} applied deltas have no send time`);
        check(matched.every((timing) => timing.rendered && Number.isFinite(timing.paintedAt)),
            "a delta was applied but no render or next frame followed");
        const toHost = (pageTime: number): number => pageTime - offset.offsetMs;
        const sendToPainted = matched.map((timing) => toHost(timing.paintedAt) - tap.sentAt.get(timing.seq)!);
        const sendToReceived = matched.map((timing) => toHost(timing.receivedAt) - tap.sentAt.get(timing.seq)!);
        const receivedToRendered = matched.map((timing) => timing.renderedAt - timing.receivedAt);
        const receivedToPainted = matched.map((timing) => timing.paintedAt - timing.receivedAt);
        const renderFrame = matched.map((timing) => timing.renderedAt - timing.frameStart);
        const latency = {
            deltas_sent: liveSent, deltas_measured: matched.length, mean_delta_bytes: tap.deltaBytes / Math.max(1, tap.sentAt.size),
            clock_offset_ms: offset.offsetMs, clock_offset_uncertainty_ms: offset.uncertaintyMs,
            clock_offset_drift_ms: offsetAfter.offsetMs - offsetBefore.offsetMs,
            send_to_painted_ms: stats(sendToPainted), send_to_received_ms: stats(sendToReceived),
            received_to_rendered_ms: stats(receivedToRendered), received_to_painted_ms: stats(receivedToPainted),
            render_frame_ms: stats(renderFrame),
            target_p99_ms: latencyTargetMs, pass: percentile(sendToPainted, 99) <= latencyTargetMs,
            raw: matched.map((timing, i) => ({seq: timing.seq, send_to_received_ms: sendToReceived[i],
                received_to_rendered_ms: receivedToRendered[i],
                received_to_painted_ms: receivedToPainted[i], send_to_painted_ms: sendToPainted[i]}))
        };
        tap.sentAt.clear();

        // quiet: no traffic, a last tick; the page must show the manager's exact count
        clearInterval(trafficTimer);
        await sleep(3 * deltaMs);
        const quietSeq = tap.lastSeq;
        check(await page.evaluate(([seq, timeout]) => window.__benchPanelProbe!.waitRendered(seq, timeout), [quietSeq, 10_000] as const),
            `the page did not apply delta ${quietSeq}`);
        const afterLive = await pageState(page);
        checkPage(afterLive, manager, "after the live run");
        stopTimers();

        // ---- 2. memory: N simulated minutes in accelerated time ------------------------------------
        const deltasPlanned = Math.round(minutes * 60_000 / deltaMs);
        console.log(`bench:panel: ${minutes} simulated minutes (${deltasPlanned} deltas) as fast as the page renders them…`);
        const cdp = await browser.context.newCDPSession(page);
        clock.simulate(clock.now());
        const pushDelta = async (): Promise<void> => {
            const until = clock.now() + deltaMs;
            traffic.runUntil(until);
            clock.simulate(until);
            const sent = tap.sent;
            manager.tick();
            check(tap.sent === sent + 1, "a tick with traffic sent no delta");
            check(await page.evaluate(([seq, timeout]) => window.__benchPanelProbe!.waitRendered(seq, timeout), [tap.lastSeq,
                15_000] as const),
            `the page did not apply delta ${tap.lastSeq} within 15 s`);
        };
        for (let i = 0; i < warmUpDeltas; i++)
            await pushDelta();
        const points: MemoryPoint[] = [await memoryPoint(cdp, page, 0, 0)];
        printMemoryPoint(points[0]!);
        const memoryBegan = nowMs();
        const checkpoints = new Set(Array.from({length: 5}, (_, i) => Math.round(deltasPlanned * (i + 1) / 5)));
        for (let delta = 1; delta <= deltasPlanned; delta++) {
            await pushDelta();
            if (checkpoints.has(delta)) {
                points.push(await memoryPoint(cdp, page, delta * deltaMs / 60_000, delta));
                printMemoryPoint(points[points.length - 1]!);
            }
        }
        const memoryWallS = (nowMs() - memoryBegan) / 1000;
        const afterMemory = await pageState(page);
        checkPage(afterMemory, manager, "after the memory run");
        check(tap.subscriptions === subscriptions, "the page re-subscribed (asked for a snapshot) during the memory run");
        check(afterMemory.seq === tap.lastSeq, `the page is at delta ${afterMemory.seq}, the host sent ${tap.lastSeq}`);
        check(problems.length === 0, `the page logged errors:\n${problems.join("\n")}`);

        const first = points[0]!;
        const end = points[points.length - 1]!;
        const heapGrowth = end.page_heap_used_bytes - first.page_heap_used_bytes;
        const rssGrowth = end.host_rss_bytes - first.host_rss_bytes;
        const memory = {
            simulated_minutes: minutes, deltas: deltasPlanned, warm_up_deltas: warmUpDeltas, wall_s: memoryWallS,
            deltas_per_s: deltasPlanned / memoryWallS, host_gc_forced: globalThis.gc !== undefined, points,
            page_heap_growth_bytes: heapGrowth, page_heap_target_bytes: heapTargetBytes, page_heap_pass: heapGrowth <= heapTargetBytes,
            host_rss_growth_bytes: rssGrowth, host_rss_target_bytes: rssTargetBytes, host_rss_pass: rssGrowth <= rssTargetBytes,
            host_heap_used_growth_bytes: end.host_heap_used_bytes - first.host_heap_used_bytes,
            // Informative, not the verdict: from the first fifth on.
            host_rss_growth_after_first_fifth_bytes: end.host_rss_bytes - (points[1] ?? first).host_rss_bytes
        };
        const result = {
            chromium: browser.context.browser()?.version() ?? "unknown", viewport,
            setup: {fill_simulated_minutes: fillMinutes, fill_wall_s: fillWallS, ledger_requests: filled.requests.length,
                series_points: filled.timeSeries.length, requests_finished: traffic.finished, token_events: traffic.tokens,
                steps: traffic.steps},
            page_after_live: afterLive, page_after_memory: afterMemory, latency, memory
        };

        const s = latency.send_to_painted_ms;
        console.log(`Stats panel at scale in headless Chromium ${result.chromium} (${viewport.width}×${viewport.height}, window 15 min): ` +
            `${afterLive.requests} requests, ${afterLive.seriesPoints} time-series points, ${clientLabels.length} clients`);
        console.log(`  delta → painted, ${liveSeconds} s live at 4 Hz, ${s.count} deltas: host send → painted p50 ${ms(s.p50)},
            p99 ${ms(s.p99)}, ` +
            `max ${ms(s.max)} (target p99 ≤ ${latencyTargetMs} ms: ${verdict(latency.pass)})`);
        console.log(`    page receive → painted p50 ${ms(latency.received_to_painted_ms.p50)},
            p99 ${ms(latency.received_to_painted_ms.p99)}; ` +
            `render frame p50 ${ms(latency.render_frame_ms.p50)}, p99 ${ms(latency.render_frame_ms.p99)}; ` +
            `transit p99 ${ms(latency.send_to_received_ms.p99)}; clocks aligned ±${latency.clock_offset_uncertainty_ms.toFixed(2)} ms`);
        console.log(`  memory, ${minutes} simulated minutes at 4 Hz (${deltasPlanned} deltas of 250 ms each, accelerated: ` +
            `${memoryWallS.toFixed(0)} s, ${memory.deltas_per_s.toFixed(1)} deltas/s):`);
        console.log(`    page JS heap ${mb(first.page_heap_used_bytes)} → ${mb(end.page_heap_used_bytes)} (${signedMb(heapGrowth)}; ` +
            `target ≤ +${mb(heapTargetBytes)}: ${verdict(memory.page_heap_pass)}); DOM nodes ${first.page_dom_nodes} → ${end.page_dom_nodes}`);
        console.log(`    host RSS ${mb(first.host_rss_bytes)} → ${mb(end.host_rss_bytes)} (${signedMb(rssGrowth)}; flat = ≤ +${mb(rssTargetBytes)}: ` +
            `${verdict(memory.host_rss_pass)}); host heap used ${signedMb(memory.host_heap_used_growth_bytes)}` +
            `${memory.host_gc_forced ? "" : " (no forced GC)"}; from ${(points[1] ?? first).simulated_minutes.toFixed(1)} min on ` +
            `${signedMb(memory.host_rss_growth_after_first_fifth_bytes)}`);
        if (flags.json !== undefined)
            fs.writeFileSync(flags.json, JSON.stringify(result, null, 2) + "\n");
    } finally {
        stopTimers();
        await browser?.close();
        await server?.close();
        await manager.dispose();
    }
}

main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
});
