/**
 * The stats panel end to end, in real Chromium: a real engine (EngineClient on the generated tiny
 * model, real node-llama-cpp) feeding the real StatsManager, served by DashboardServer; the page
 * shows the manager's numbers in the KPI tiles, draws every chart, logs no console errors and no CSP
 * violations, survives malformed messages (from the page's transport and from the server), exports,
 * pauses, resets, and keeps its buffers bounded when fed an hour of data. Saves a screenshot to
 * test/e2e/artifacts/panel.png.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import type {Page} from "playwright-core";
import {DashboardServer, type DashboardStatsSource} from "../../extension/host/dashboard/dashboardServer.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {defaultPrefillChunkTokens, defaultPromptCacheMiB} from "../../protocol/engineOptions.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import type {ClientStatsView, StatsDelta, StatsSnapshotView} from "../../protocol/statsView.js";
import {encodeMessage, ReadyMessage} from "../../protocol/panelMessages.js";
import {tinyModelPath} from "../helpers/testModels.js";
import {canvasInk} from "./canvasInk.js";
import {chromiumSkipReason, launchChromium, type LaunchedBrowser} from "./chromium.js";
import {backendHeaderNames, expectedBackend} from "../helpers/expectedBackend.js";
import {ensurePanelBuilt, repoRoot, webviewDistDir} from "./panelBuild.js";
import {connectStream} from "./wsClient.js";

const artifactsDir = path.join(repoRoot, "test", "e2e", "artifacts");
const chartNames = ["throughput", "latency", "requests", "cache", "histograms", "timeline"];
const prompt = "Once upon a time there was a little robot";

type PageProblem = {kind: string, text: string};

/** The page's KPI tiles: key → {text, value}. */
async function readTiles(page: Page): Promise<Record<string, {text: string, value: number | null}>> {
    return await page.$$eval("[data-metric]", (elements) => Object.fromEntries(elements.map((element) => {
        const html = element as HTMLElement;
        const value = html.dataset.value === undefined || html.dataset.value === "" ? null : Number(html.dataset.value);
        return [html.dataset.metric!, {text: html.textContent ?? "", value}];
    })));
}

/**
 * A number as the panel should write it, by hand here: integers whole, else 0/1/2/3 decimals by
 * magnitude (≥ 100, ≥ 10, ≥ 1, below), "–" for none.
 */
function written(value: number | null): string {
    if (value === null)
        return "–";
    if (Number.isInteger(value))
        return String(value);
    const magnitude = Math.abs(value);
    return value.toFixed(magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3);
}

const toMs = (seconds: number | null): number | null => seconds === null ? null : seconds * 1000;

/**
 * The rates of one active period made of `records` (requests that overlapped): their tokens and their
 * count ÷ the time from the first arrival to the last finish delivered.
 */
function periodRates(records: readonly RequestLifecycle[]): {generation: number, prompt: number, requests: number} {
    const start = Math.min(...records.map((record) => record.arrival));
    const end = Math.max(...records.map((record) => record.lastDelivered!));
    const seconds = (end - start) / 1000;
    const sum = (of: (record: RequestLifecycle) => number): number => records.reduce((total, record) => total + of(record), 0);
    return {generation: sum((record) => record.generatedTokens) / seconds, prompt: sum((record) => record.promptTokens) / seconds,
        requests: records.length / seconds};
}

/**
 * The exact value each tile should show for an idle snapshot after one period of `records`, written out
 * here from the raw numbers (not from kpiDefinitions, the mapping under test): latencies in ms, the
 * prefix cache and KV cache in %, the rates of that last active period (nothing runs).
 */
function expectedTiles(snapshot: StatsSnapshotView, records: readonly RequestLifecycle[]): Record<string, number | null> {
    const {percentiles, counters, gauges} = snapshot;
    const rates = periodRates(records);
    return {
        output_throughput: rates.generation, prompt_throughput: rates.prompt, request_throughput: rates.requests,
        median_ttft_ms: toMs(percentiles.ttft.p50), p99_ttft_ms: toMs(percentiles.ttft.p99),
        median_itl_ms: toMs(percentiles.itl.p50), p99_itl_ms: toMs(percentiles.itl.p99),
        median_tpot_ms: toMs(percentiles.tpot.p50), median_e2el_ms: toMs(percentiles.e2e.p50),
        num_requests_running: 0, num_requests_waiting: 0, kv_cache_usage_perc: gauges.kvCacheUsage * 100,
        prefix_cache_hit_rate: counters.prefixCacheHits / counters.prefixCacheQueries * 100,
        external_prefix_cache_hit_rate: counters.externalPrefixCacheHits / counters.externalPrefixCacheQueries * 100,
        completed: counters.requests.completed, failed: counters.requests.failed, num_preemptions: counters.preemptions
    };
}

/** The clients table's rows as the panel should write them, by hand here (not from clientColumns). */
function expectedClientRows(rows: readonly ClientStatsView[]): string[][] {
    const pair = (a: number | null, b: number | null): string => `${written(a)} / ${written(b)}`;
    return rows.map((row) => [
        row.client, String(row.arrived), String(row.inFlight), pair(row.promptTokens, row.generationTokens),
        pair(toMs(row.ttftP50S), toMs(row.ttftP99S)), pair(toMs(row.itlP50S), toMs(row.itlP99S)),
        row.aborted > 0 ? `${row.failed} (+${row.aborted} aborted)` : String(row.failed)
    ]);
}

describe("stats panel in Chromium (real engine)", {skip: chromiumSkipReason()}, () => {
    let client: EngineClient;
    let manager: StatsManager;
    let detach: () => void;
    let server: DashboardServer;
    let browser: LaunchedBrowser;
    let page: Page;
    const problems: PageProblem[] = [];
    /** When set, the server also delivers this malformed delta to the page (the host-side path). */
    let injectBadDelta = false;

    async function runRequests(count: number, label?: string): Promise<void> {
        const handles = Array.from({length: count}, (_, i) =>
            client.generate({prompt: `${prompt} ${i}`, maxTokens: 16, ignoreEos: true, temperature: 0, ...(label !== undefined ? {client: label} : {})}));
        const results = await Promise.all(handles.map((handle) => handle.done));
        for (const result of results)
            assert.equal(result.reason, "length", result.error);
    }

    async function waitForTile(key: string, value: number, timeout = 15_000): Promise<void> {
        await page.waitForFunction(([metric, expected]) => document.querySelector<HTMLElement>(`[data-metric="${metric}"]`)?.dataset.value === String(expected),
            [key, value] as const, {timeout});
    }

    before(async () => {
        ensurePanelBuilt();
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 4, statsIntervalMs: 200});
        manager = new StatsManager();
        detach = client.observe(manager);
        await client.start();
        const source: DashboardStatsSource = {
            snapshot: () => manager.snapshot(),
            reset: () => manager.reset(),
            subscribe: (listener, options) => manager.subscribe((delta) => {
                listener(delta);
                if (injectBadDelta) {
                    injectBadDelta = false;
                    listener({t: delta.t, seq: "not a number", gauges: {running: "many"}} as unknown as StatsDelta);
                }
            }, options)
        };
        server = await DashboardServer.listen({port: 0, source, webviewDir: webviewDistDir, engineStartedAt: () => Date.now() - 65_000});
        browser = await launchChromium();
        page = await browser.context.newPage();
        await page.addInitScript(() => {
            document.addEventListener("securitypolicyviolation", (event) => {
                console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
            });
        });
        page.on("console", (message) => {
            if (message.type() === "error" || message.type() === "warning")
                problems.push({kind: `console.${message.type()}`, text: message.text()});
        });
        page.on("pageerror", (error) => problems.push({kind: "pageerror", text: error.message}));
        page.on("requestfailed", (request) => problems.push({kind: "requestfailed", text: `${request.url()} ${request.failure()?.errorText}`}));
        await page.goto(server.url);
        await waitForTile("completed", 0);
    });

    after(async () => {
        await browser?.close();
        await server?.close();
        detach?.();
        await client?.stop();
        await manager?.dispose();
    });

    test("KPI tiles show the StatsManager's numbers after 12 requests", async () => {
        await runRequests(12);
        await waitForTile("completed", 12);
        const tiles = await readTiles(page);
        assert.ok(tiles.output_throughput!.value! > 0, `output_throughput ${tiles.output_throughput!.text}`);
        assert.ok(tiles.prompt_throughput!.value! > 0);
        assert.ok(tiles.request_throughput!.value! > 0);
        // the percentiles and counters are stable once the requests are done: exact agreement
        const snapshot = manager.snapshot();
        assert.equal(snapshot.requests.length, 12);
        const expected = expectedTiles(snapshot, snapshot.requests);
        // the prompts share their start, so the requests scheduled after the first four found it cached
        assert.ok(expected.prefix_cache_hit_rate! > 0, `prefix cache hit rate ${expected.prefix_cache_hit_rate}`);
        assert.ok(expected.output_throughput! > 0 && expected.median_ttft_ms! > 0);
        const stable = Object.keys(expected).filter((key) => key !== "kv_cache_usage_perc");
        for (const key of stable)
            await waitForTile(key, expected[key]!, 5000).catch(async () => {
                const tile = (await readTiles(page))[key];
                assert.fail(`${key}: page ${tile?.text} (${tile?.value}), expected ${expected[key]}`);
            });
        const settled = await readTiles(page);
        for (const key of stable) {
            assert.equal(settled[key]!.value, expected[key], `${key}: page ${settled[key]!.text}, expected ${expected[key]}`);
            assert.equal(settled[key]!.text, written(expected[key]!), `${key}: the element holds just the number, written as the panel writes numbers`);
        }
        // the KV cache gauge follows the engine's own reports: the page agrees with the manager once they settle
        await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-metric="kv_cache_usage_perc"]')?.dataset.value !== undefined);
        for (let tries = 0; ; tries++) {
            const kv = (await readTiles(page)).kv_cache_usage_perc!;
            const managerKv = manager.snapshot().gauges.kvCacheUsage * 100;
            if (kv.value === managerKv && kv.text === written(managerKv))
                break;
            assert.ok(tries < 50, `kv_cache_usage_perc: page ${kv.text} (${kv.value}), manager ${managerKv}`);
            await page.waitForTimeout(100);
        }
        assert.equal(settled.completed!.text, "12");
        assert.equal(settled.failed!.text, "0");
        for (const key of ["median_ttft_ms", "median_itl_ms", "median_tpot_ms", "median_e2el_ms"])
            assert.ok(settled[key]!.value! > 0, `${key} ${settled[key]!.text}`);
        const header = await page.$$eval("[data-field]", (elements) => Object.fromEntries(elements.map((e) => [(e as HTMLElement).dataset.field!, e.textContent])));
        assert.match(header.model!, /F16|Q|params/);
        assert.equal(header.backend, backendHeaderNames[expectedBackend()]);
        assert.equal(header.context, "1024 tokens");
        assert.equal(header.sequences, "4");
        // The tiny model's shape is one tile padding can cost, and the tiles are the CPU's.
        assert.equal(header.prefixCache, `on${expectedBackend() === "cpu" ? ", tile padding" : ""}, prompt cache ${defaultPromptCacheMiB} MiB`);
        assert.equal(header.prefillChunk, `${defaultPrefillChunkTokens(expectedBackend())} tokens/step`);
        assert.match(header.uptime!, /^1m \d\ds$/);
        assert.match(header.state!, /^(idle|busy)$/);
    });

    test("idle after the requests: the rate tiles say how fast the last active period went, and how long ago it ended", async () => {
        const note = page.locator('[data-note="output_throughput"]');
        await note.waitFor({state: "visible", timeout: 10_000});
        const first = await note.textContent() ?? "";
        assert.match(first, /^last active \d+ s ago$/);
        const tile = await page.$eval('[data-metric="output_throughput"]', (element) => ({
            value: Number((element as HTMLElement).dataset.value), lastActive: (element as HTMLElement).dataset.lastActive
        }));
        assert.equal(tile.lastActive, "true", "dimmed as a past value");
        assert.equal(tile.value, periodRates(manager.snapshot().requests).generation);
        assert.ok(tile.value > 0);
        // the windowed rate falls to 0 (5 s window) while the tile keeps the period's rate; "ago" keeps counting
        await page.waitForTimeout(1500);
        assert.equal(Number(await page.$eval('[data-metric="output_throughput"]', (element) => (element as HTMLElement).dataset.value)), tile.value);
        const later = Number(/(\d+) s ago/.exec(await note.textContent() ?? "")?.[1]);
        assert.ok(later > Number(/(\d+) s ago/.exec(first)?.[1]), `"${first}" then ${later} s`);
    });

    test("the timeline's tooltip tells a request's own output tok/s, TTFT, mean ITL and sequence", async () => {
        const canvas = page.locator('canvas[data-chart="timeline"]');
        await canvas.scrollIntoViewIfNeeded();
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        // the newest request's decode bar (the top row)
        const point = await page.evaluate(() => {
            const chart = window.__inferenceMonitorPanel!.app.timeline.chart;
            const bar = chart.getDatasetMeta(2).data[0] as unknown as {x: number, y: number, base: number};
            const rect = chart.canvas.getBoundingClientRect();
            return {x: rect.left + (bar.x + bar.base) / 2, y: rect.top + bar.y, id: window.__inferenceMonitorPanel!.app.timeline.shownRows[0]!.id};
        });
        await page.mouse.move(point.x, point.y);
        await page.waitForFunction(() => (window.__inferenceMonitorPanel!.app.timeline.chart.tooltip?.afterBody.length ?? 0) > 0, undefined, {timeout: 5000});
        const tooltip = await page.evaluate(() => {
            const model = window.__inferenceMonitorPanel!.app.timeline.chart.tooltip!;
            return {lines: model.body.flatMap((part) => part.lines), afterBody: model.afterBody};
        });
        const record = manager.snapshot().requests.find((candidate) => candidate.id === point.id)!;
        assert.ok(record !== undefined && record.generatedTokens === 16);
        const seconds = (record.lastDelivered! - record.arrival) / 1000;
        assert.deepEqual(tooltip.afterBody, [
            `output ${written(16 / seconds)} tok/s (16 tokens in ${written(seconds)} s)`,
            `TTFT ${written(toMs((record.firstDelivered! - record.arrival) / 1000))} ms`,
            `ITL ${written(toMs((record.lastToken! - record.firstToken!) / 1000 / 15))} ms (mean)`,
            `sequence ${record.sequence}`
        ]);
        assert.ok(Number.isInteger(record.sequence), "the engine said which sequence ran it");
        assert.ok(tooltip.lines.some((line) => /^decode \d+(\.\d+)? ms$/.test(line)), `body ${JSON.stringify(tooltip.lines)}`);
        await page.mouse.move(0, 0);
    });

    test("every chart is drawn, with its data", async () => {
        // the time series samples once a second: wait for a sample that saw the generation throughput
        await page.waitForFunction(() => window.__inferenceMonitorPanel!.app.store.series.toArray().some((point) => point.generationTokensPerS > 0), undefined, {timeout: 10_000});
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        for (const name of chartNames) {
            const ink = await canvasInk(page, name);
            assert.ok(ink.total > 10_000, `${name}: canvas ${ink.total} px`);
            assert.ok(ink.drawn > ink.total * 0.01, `${name}: only ${ink.drawn} of ${ink.total} pixels drawn`);
        }
        assert.ok((await canvasInk(page, "throughput", "--im-blue")).colored > 50, "throughput: no generation series drawn");
        assert.ok((await canvasInk(page, "histograms", "--im-orange")).colored > 50, "histograms: no TTFT distribution drawn");
        assert.ok((await canvasInk(page, "timeline", "--im-blue")).colored > 200, "timeline: no decode bars drawn");
    });

    test("saves a screenshot", async () => {
        fs.mkdirSync(artifactsDir, {recursive: true});
        await page.screenshot({path: path.join(artifactsDir, "panel.png"), fullPage: true});
        const dark = await browser.context.newPage();
        await dark.emulateMedia({colorScheme: "dark"});
        await dark.goto(server.url);
        await dark.waitForFunction(() => document.querySelector<HTMLElement>('[data-metric="completed"]')?.dataset.value === "12");
        await dark.waitForTimeout(300);
        await dark.screenshot({path: path.join(artifactsDir, "panel-dark.png"), fullPage: true});
        await dark.close();
    });

    test("the WebSocket stream delivers a snapshot, then deltas with increasing seq", async () => {
        const stream = await connectStream(server.streamUrl);
        stream.sendRaw(encodeMessage(ReadyMessage.create({protocolVersion: 1})));
        await stream.waitFor((message) => message.type === "delta", 3);
        assert.equal(stream.messages[0]!.type, "snapshot");
        const seqs = stream.messages.slice(1).map((message) => message.type === "delta" ? message.delta.seq : -1);
        assert.deepEqual(seqs, seqs.map((_, i) => i + 1));
        const times = stream.messages.slice(1).map((message) => message.type === "delta" ? message.delta.t : 0);
        for (let i = 1; i < times.length; i++)
            assert.ok(times[i]! - times[i - 1]! >= 240, `deltas only ${times[i]! - times[i - 1]!} ms apart (> 4 Hz)`);
        stream.socket.close();
    });

    test("malformed messages are dropped and counted; the page keeps working", async () => {
        const rejectedBefore = await page.evaluate(() => window.__inferenceMonitorPanel!.app.counters.rejected);
        await page.evaluate(() => {
            const panel = window.__inferenceMonitorPanel!;
            panel.receive("{not json");
            panel.receive({type: "delta", delta: {t: 1, seq: -4}});
            panel.receive({type: "snapshot", snapshot: {t: 1}, seq: 0});
            panel.receive({type: "transmogrify"});
            panel.receive(null);
        });
        injectBadDelta = true;
        await page.waitForFunction((before) => window.__inferenceMonitorPanel!.app.counters.rejected >= before + 6, rejectedBefore, {timeout: 10_000});
        assert.match(await page.textContent('[data-field="rejected"]') ?? "", /malformed messages? dropped/);
        await runRequests(2);
        await waitForTile("completed", 14);
        const counters = await page.evaluate(() => window.__inferenceMonitorPanel!.app.counters);
        assert.equal(counters.gaps, 0, "the bad delta did not break the seq chain");
    });

    test("export downloads CSV built by the host", async () => {
        const [download] = await Promise.all([page.waitForEvent("download"), page.click('[data-action="export-csv"]')]);
        const file = await download.path();
        const lines = fs.readFileSync(file, "utf8").trim().split("\r\n");
        assert.match(download.suggestedFilename(), /^inference-monitor-.*-timeseries\.csv$/);
        assert.match(lines[0]!, /^time,prompt_tokens_per_s,generation_tokens_per_s/);
        const snapshotPoints = manager.snapshot().timeSeries.length;
        assert.ok(lines.length >= 2 && Math.abs(lines.length - 1 - snapshotPoints) <= 1, `${lines.length - 1} rows vs ${snapshotPoints} points`);
    });

    test("pause stops applying deltas; resume catches up with a snapshot", async () => {
        await page.click('[data-action="pause"]');
        await page.waitForFunction(() => document.querySelector('[data-action="pause"]')?.textContent === "Resume");
        await runRequests(3);
        await page.waitForTimeout(800);
        assert.equal((await readTiles(page)).completed!.value, 14, "paused: no new numbers");
        await page.click('[data-action="pause"]');
        await waitForTile("completed", 17);
    });

    test("reset asks the host; the page starts over from the reset snapshot", async () => {
        await page.click('[data-action="reset"]');
        await page.click('[data-action="reset"]');
        await waitForTile("completed", 0);
        assert.equal(manager.snapshot().counters.requests.completed, 0);
    });

    test("re-reads the theme colours when the VS Code theme class changes", async () => {
        await page.evaluate(() => {
            document.documentElement.style.setProperty("--vscode-charts-purple", "#ff00ff");
            document.body.classList.add("vscode-dark");
        });
        await runRequests(2);
        await waitForTile("completed", 2);
        await page.waitForFunction(() => window.__inferenceMonitorPanel!.app.store.series.toArray().some((point) => point.promptTokensPerS > 0), undefined, {timeout: 10_000});
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        assert.ok((await canvasInk(page, "throughput", "--im-purple")).colored > 20, "the prompt series uses the new theme colour");
    });

    test("the clients table shows each client's numbers; the timeline filter shows one client's requests", async () => {
        await Promise.all([runRequests(3, "curl"), runRequests(2, "openai-js")]);
        await waitForTile("completed", 7);
        const snapshot = manager.snapshot();
        assert.deepEqual(snapshot.clients.map((row) => [row.client, row.arrived, row.completed]), [["local", 2, 2], ["curl", 3, 3], ["openai-js", 2, 2]]);
        // the page's rows, cell by cell, as the panel formats the manager's rows (percentiles settle within a sample)
        const expectedRows = expectedClientRows(snapshot.clients);
        await page.waitForFunction((rows) => JSON.stringify(Array.from(document.querySelectorAll("[data-card=clients] tbody tr"),
            (tr) => Array.from(tr.children, (cell) => cell.textContent))) === JSON.stringify(rows), expectedRows, {timeout: 10_000});
        const curlRow = await page.$$eval('[data-client="curl"] [data-col]', (cells) => Object.fromEntries(cells.map((cell) => [(cell as HTMLElement).dataset.col!, cell.textContent])));
        assert.equal(curlRow.requests, "3");
        assert.equal(curlRow.running, "0");
        assert.equal(curlRow.errors, "0");
        assert.match(curlRow.tokens!, /^\d+ \/ 48$/, "16 generated tokens each");
        assert.match(curlRow.ttft!, /^[\d.]+ \/ [\d.]+$/);

        const select = '[data-action="timeline-client"]';
        const options = await page.$$eval(`${select} option`, (elements) => elements.map((option) => [(option as HTMLOptionElement).value, option.textContent]));
        assert.deepEqual(options, [["", "All clients"], ["local", "local"], ["curl", "curl"], ["openai-js", "openai-js"]]);
        const shown = async (): Promise<Array<[string, string]>> =>
            await page.evaluate(() => window.__inferenceMonitorPanel!.app.timeline.shownRows.map((row) => [row.id, row.client] as [string, string]));
        assert.equal((await shown()).length, 7);
        await page.selectOption(select, "curl");
        const curlIds = snapshot.requests.filter((record) => record.client === "curl").map((record) => record.id).reverse();
        assert.deepEqual(await shown(), curlIds.map((id) => [id, "curl"]), "only curl's requests, newest on top");
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        assert.ok((await canvasInk(page, "timeline", "--im-blue")).colored > 50, "timeline: curl's decode bars drawn");
        await page.selectOption(select, "openai-js");
        assert.deepEqual((await shown()).map(([, label]) => label), ["openai-js", "openai-js"]);
        await page.selectOption(select, "");
        assert.equal((await shown()).length, 7);
    });

    test("the sequences card shows what each engine sequence runs, then the sequences free again", async () => {
        // Every state the card goes through, recorded in the page (a request runs for about a second here).
        await page.evaluate(() => {
            const seen: string[][] = [];
            (window as unknown as {sequenceStates: string[][]}).sequenceStates = seen;
            const list = document.querySelector("[data-card=sequences] .sequence-list")!;
            new MutationObserver(() => seen.push(Array.from(list.querySelectorAll<HTMLElement>(".sequence-row"),
                (row) => `${row.dataset.state}|${row.querySelector(".sequence-text")!.textContent}|${row.querySelector<HTMLElement>(".sequence-fill")!.style.width}`)))
                .observe(list, {childList: true});
        });
        const handles = [0, 1].map((i) => client.generate({prompt: `${prompt} ${i}`, maxTokens: 1000, ignoreEos: true, client: "seq-test"}));
        const results = await Promise.all(handles.map((handle) => handle.done));
        await page.waitForFunction(() => Array.from(document.querySelectorAll<HTMLElement>("[data-card=sequences] .sequence-row"),
            (row) => row.dataset.state).join() === "free,free,free,free", undefined, {timeout: 10_000});
        const states = await page.evaluate(() => (window as unknown as {sequenceStates: string[][]}).sequenceStates);
        const busiest = states.reduce((best, rows) => rows.filter((row) => row.startsWith("busy")).length > best.filter((row) => row.startsWith("busy")).length
            ? rows : best, [] as string[]);
        const busyRows = busiest.filter((row) => row.startsWith("busy|"));
        assert.equal(busyRows.length, 2, `both requests seen running at once: ${JSON.stringify(states.slice(0, 5))}`);
        const sequences = results.map((result) => result.sequence).sort();
        assert.deepEqual(busiest.map((row, sequence) => row.startsWith("busy") ? sequence : -1).filter((sequence) => sequence >= 0), sequences,
            "on the sequences their lifecycles name");
        for (const row of busyRows) {
            const [, text, width] = row.split("|");
            assert.match(text!, /^seq-test · \w{6} · [\d,]+ \/ 1,?024 tokens$/);
            assert.ok(Number.parseFloat(width!) > 0, `a filled bar: ${width}`);
        }
        assert.match(await page.textContent("[data-card=sequences] .card-note") ?? "", /^0 of 4 busy · 1,?024 tokens each$/);
    });

    test("memory stays bounded: an hour of time series and thousands of requests", async () => {
        const held = await page.evaluate(() => {
            const panel = window.__inferenceMonitorPanel!;
            const store = panel.app.store;
            let seq = store.seq;
            let t = store.t;
            // 5000 one-second samples (83 min) and 5000 requests, 4 per delta (no helper functions here:
            // tsx would wrap them in a __name() the page does not have)
            for (let batch = 0; batch < 1250; batch++) {
                const points = [];
                const requests = [];
                for (let i = 0; i < 4; i++) {
                    t += 1000;
                    points.push({t, promptTokensPerS: 10, generationTokensPerS: 20, requestsPerS: 1, ttftP50S: 0.01, ttftP99S: 0.02,
                        itlP50S: 0.005, itlP99S: 0.01, running: 1, waiting: 0, kvCacheUsage: 0.5, vramUsedBytes: 0});
                    requests.push({id: `mem-${batch}-${i}`, client: "mem", phase: "finished", priority: 0, maxTokens: 16, arrival: t, queued: t, scheduled: t + 1,
                        firstToken: t + 5, lastToken: t + 50, finished: t + 50, preemptions: [], reason: "length", promptTokens: 8, cachedTokens: 0, generatedTokens: 16,
                        metrics: {ttftS: 0.005}});
                }
                panel.receive(JSON.stringify({type: "delta", delta: {t, seq: ++seq, timeSeries: points, requests}}));
            }
            return {points: store.series.size, backing: store.series.capacityUsed, requests: store.requests.size, limits: panel.storeLimits, seq: store.seq, expected: seq};
        });
        assert.equal(held.seq, held.expected, "every delta applied");
        assert.ok(held.points <= 15 * 60 + 1, `${held.points} points held`);
        assert.ok(held.backing <= 2 * held.limits.maxSeriesPoints + 64, `${held.backing} points in the backing array`);
        assert.equal(held.requests, held.limits.maxRequests);
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    });

    test("no console errors, page errors or CSP violations", () => {
        assert.deepEqual(problems, []);
    });
});
