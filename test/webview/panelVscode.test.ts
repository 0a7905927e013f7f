/**
 * The same panel bundle on VS Code's transport, in Chromium: the page from renderPanelHtml with
 * `{kind: "vscode"}`, a stand-in `acquireVsCodeApi` recording what the panel posts, and the test
 * playing the extension host with window messages (snapshot, deltas, a seq gap, paused, export
 * results, errors, garbage). Checks the conversation the VS Code side must implement.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import type {Page} from "playwright-core";
import type {StatsDelta} from "../../protocol/statsView.js";
import {makeNonce, renderPanelHtml} from "../../extension/host/panel/panelHtml.js";
import {DeltaMessage, ErrorMessage, ExportResultMessage, PausedMessage, SnapshotMessage, type PanelToHost} from "../../protocol/panelMessages.js";
import {chromiumSkipReason, collectPageProblems, launchChromium, type LaunchedBrowser} from "./chromium.js";
import {ensurePanelBuilt, webviewDistDir} from "./panelBuild.js";
import {fakeEngineInfo, fakeStats, type FakeStats} from "./statsFixtures.js";

const origin = "http://panel.test";

describe("stats panel on the VS Code transport (Chromium)", {skip: chromiumSkipReason()}, () => {
    let browser: LaunchedBrowser;
    let page: Page;
    let stats: FakeStats;
    const deltas: StatsDelta[] = [];
    const problems: string[] = [];

    const post = async (message: unknown): Promise<void> => {
        await page.evaluate((data) => window.postMessage(data, "*"), message);
    };
    const posted = async (): Promise<PanelToHost[]> => await page.evaluate(() => (window as unknown as {__posted: PanelToHost[]}).__posted);
    const waitPosted = async (match: (message: PanelToHost) => boolean, what: string): Promise<void> => {
        for (let i = 0; i < 100; i++) {
            if ((await posted()).some(match))
                return;
            await page.waitForTimeout(50);
        }
        assert.fail(`the panel never posted ${what}; it posted ${JSON.stringify(await posted())}`);
    };
    const tile = async (metric: string): Promise<string | undefined> =>
        await page.$eval(`[data-metric="${metric}"]`, (element) => (element as HTMLElement).dataset.value);
    const waitTile = async (metric: string, value: number): Promise<void> => {
        await page.waitForFunction(([key, expected]) => document.querySelector<HTMLElement>(`[data-metric="${key}"]`)?.dataset.value === String(expected),
            [metric, value] as const, {timeout: 5000});
    };

    before(async () => {
        ensurePanelBuilt();
        stats = fakeStats();
        for (let i = 0; i < 3; i++) {
            stats.runRequest(`early-${i}`);
            stats.advance(1000);
        }
        browser = await launchChromium();
        page = await browser.context.newPage();
        collectPageProblems(page, problems);
        // A string, not a function: tsx would wrap named arrow functions in a __name() the page lacks.
        await page.addInitScript({content: `
            window.__posted = [];
            window.acquireVsCodeApi = function () { return {postMessage: function (message) { window.__posted.push(message); }}; };
            document.addEventListener("securitypolicyviolation", function (event) { console.error("CSP violation: " + event.violatedDirective); });
        `});
        const html = renderPanelHtml({scriptUri: `${origin}/panel.js`, styleUri: `${origin}/panel.css`, cspSource: origin, nonce: makeNonce(), transport: {kind: "vscode"}});
        await page.route(`${origin}/**`, async (route) => {
            const url = new URL(route.request().url());
            if (url.pathname === "/")
                return await route.fulfill({contentType: "text/html", body: html});
            const file = path.join(webviewDistDir, path.basename(url.pathname));
            if (!fs.existsSync(file))
                return await route.fulfill({status: 404, body: ""});
            return await route.fulfill({contentType: file.endsWith(".css") ? "text/css" : "text/javascript", body: fs.readFileSync(file)});
        });
        await page.goto(`${origin}/`);
    });

    after(async () => {
        await browser?.close();
    });

    test("announces itself with ready, then shows the snapshot", async () => {
        await waitPosted((message) => message.type === "ready" && message.protocolVersion === 1, "ready");
        await post(SnapshotMessage.create({snapshot: stats.manager.snapshot(), seq: 0}));
        stats.manager.subscribe((delta) => deltas.push(structuredClone(delta)), {maxHz: 4});
        await waitTile("completed", 3);
    });

    test("applies deltas in order", async () => {
        for (let i = 0; i < 2; i++) {
            stats.runRequest(`later-${i}`, {fail: i === 1, preempt: i === 0});
            stats.advance(1000);
        }
        for (const delta of deltas)
            await post(DeltaMessage.create({delta}));
        await waitTile("completed", 4);
        assert.equal(await tile("failed"), "1");
        assert.equal(await tile("num_preemptions"), "1");
    });

    test("idle after work: the rate tiles show the last active period's average, dimmed, with how long ago it ended", async () => {
        // the last request alone made the last period: 8 prompt and 16 generated tokens, arrival → finish delivered in 62 ms
        const expected: Array<[string, number, string, string]> = [
            ["output_throughput", 16 / 0.062, "258", "tok/s"], ["prompt_throughput", 8 / 0.062, "129", "tok/s"], ["request_throughput", 1 / 0.062, "16.1", "req/s"]
        ];
        for (const [metric, value, text, unit] of expected) {
            await waitTile(metric, value);
            const tile = await page.$eval(`[data-metric="${metric}"]`, (element) => ({
                text: element.textContent, lastActive: (element as HTMLElement).dataset.lastActive, unit: element.nextElementSibling?.textContent,
                title: (element as HTMLElement).title
            }));
            assert.deepEqual([tile.text, tile.lastActive, tile.unit], [text, "true", unit], metric);
            assert.match(tile.title, /^Nothing is running: the average over the last active period/);
            const note = page.locator(`[data-note="${metric}"]`);
            assert.ok(await note.isVisible(), `${metric}: the note shows`);
            assert.match(await note.textContent() ?? "", /^last active \d+ s ago$/);
        }
        // not a rate: no note
        assert.ok(!await page.locator('[data-note="completed"]').isVisible());
        assert.equal(await page.$eval('[data-metric="completed"]', (element) => (element as HTMLElement).dataset.lastActive), undefined);
    });

    test("a seq gap makes it ask for a snapshot", async () => {
        const last = deltas[deltas.length - 1]!;
        await post(DeltaMessage.create({delta: {t: last.t + 1000, seq: last.seq + 5}}));
        await waitPosted((message) => message.type === "requestSnapshot" && message.reason === "seqGap", "requestSnapshot(seqGap)");
        await post(SnapshotMessage.create({snapshot: stats.manager.snapshot(), seq: 0}));
        await waitTile("completed", 4);
    });

    test("pause / resume post setPaused, and resume asks for a snapshot", async () => {
        await page.click('[data-action="pause"]');
        await waitPosted((message) => message.type === "setPaused" && message.paused, "setPaused(true)");
        await post(PausedMessage.create({paused: true}));
        assert.equal(await page.textContent('[data-action="pause"]'), "Resume");
        await page.click('[data-action="pause"]');
        await waitPosted((message) => message.type === "setPaused" && !message.paused, "setPaused(false)");
        await waitPosted((message) => message.type === "requestSnapshot" && message.reason === "resume", "requestSnapshot(resume)");
    });

    test("export, reset and host errors", async () => {
        await page.click('[data-action="export-json"]');
        await waitPosted((message) => message.type === "export" && message.format === "json", "export(json)");
        await post(ExportResultMessage.create({format: "json", fileName: "stats.json", mimeType: "application/json", savedTo: "/home/me/stats.json"}));
        await page.waitForFunction(() => document.querySelector('[data-field="notice"]')?.textContent === "saved to /home/me/stats.json");
        await page.click('[data-action="reset"]');
        await page.click('[data-action="reset"]');
        await waitPosted((message) => message.type === "reset", "reset");
        await post(ErrorMessage.create({message: "could not write the file"}));
        await page.waitForFunction(() => document.querySelector('[data-field="notice"]')?.textContent === "could not write the file");
    });

    test("garbage from the host is dropped and counted", async () => {
        for (const garbage of ["text", 42, null, {type: "delta", delta: {seq: 1}}, {type: "snapshot", snapshot: {}, seq: 0}])
            await post(garbage);
        await page.waitForFunction(() => window.__inferenceMonitorPanel!.app.counters.rejected === 5);
        assert.equal(await tile("completed"), "4");
    });

    test("an engine that skipped a GPU backend (failed self-test) says which and why under the header; one that did not says nothing", async () => {
        const fresh: StatsDelta[] = [];
        const unsubscribe = stats.manager.subscribe((delta) => fresh.push(structuredClone(delta)), {maxHz: 4});
        const skipped = fakeEngineInfo();
        skipped.backend = "vulkan";
        skipped.gpuDevices = ["NVIDIA H200"];
        skipped.gpuFallbacks = [{backend: "cuda", reason: "CUDA error: the provided PTX was compiled with an unsupported toolchain."}];
        stats.manager.onEngineReady(skipped);
        stats.advance(1000);
        for (const delta of fresh.splice(0))
            await post(DeltaMessage.create({delta}));
        await page.waitForFunction(() => document.querySelector('[data-field="backend"]')?.textContent === "Vulkan");
        assert.equal(await page.textContent('[data-field="notes"]'),
            "CUDA failed the engine's GPU self-test (CUDA error: the provided PTX was compiled with an unsupported toolchain.); running on Vulkan instead.");
        assert.equal(await page.textContent('[data-field="gpu"]'), "NVIDIA H200");
        stats.manager.onEngineReady(fakeEngineInfo());
        stats.advance(1000);
        unsubscribe();
        for (const delta of fresh)
            await post(DeltaMessage.create({delta}));
        await page.waitForFunction(() => document.querySelector('[data-field="backend"]')?.textContent === "CPU");
        assert.equal(await page.textContent('[data-field="notes"]'), "");
    });

    test("another engine becoming ready (a restart with another model) shows in the header through a delta", async () => {
        const fresh: StatsDelta[] = [];
        await post(SnapshotMessage.create({snapshot: stats.manager.snapshot(), seq: 0}));
        const unsubscribe = stats.manager.subscribe((delta) => fresh.push(structuredClone(delta)), {maxHz: 4});
        await page.waitForFunction(() => document.querySelector('[data-field="model"]')?.textContent === "tiny-test (F16, 1.0 M params)");
        stats.manager.onEngineExit({code: 0, signal: null, description: "exit code 0"});
        stats.advance(1000);
        stats.manager.onEngineState("loading");
        stats.advance(1000);
        // While it loads, the header does not present the old model as the running one.
        for (const delta of fresh.splice(0))
            await post(DeltaMessage.create({delta}));
        await page.waitForFunction(() => document.querySelector('[data-field="state"]')?.textContent === "loading");
        assert.equal(await page.textContent('[data-field="model"]'), "loading… (before: tiny-test (F16, 1.0 M params))");
        assert.equal(await page.textContent('[data-field="uptime"]'), "–");
        const other = fakeEngineInfo();
        other.model = {...other.model, path: "/models/other.gguf", name: "other-model", quantization: "Q8_0", parameterCount: 2e6};
        other.contextSize = 2048;
        stats.manager.onEngineReady(other);
        stats.manager.onEngineState("ready");
        stats.advance(1000);
        unsubscribe();
        for (const delta of fresh)
            await post(DeltaMessage.create({delta}));
        await page.waitForFunction(() => document.querySelector('[data-field="model"]')?.textContent === "other-model (Q8_0, 2.0 M params)");
        assert.equal(await page.textContent('[data-field="context"]'), "2048 tokens");
        assert.equal(await page.textContent('[data-field="state"]'), "idle");
    });

    test("follows a high-contrast theme switch without errors", async () => {
        await page.evaluate(() => {
            document.documentElement.style.setProperty("--vscode-charts-blue", "#00ffff");
            document.body.classList.add("vscode-high-contrast");
        });
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        assert.deepEqual(problems, []);
    });
});
