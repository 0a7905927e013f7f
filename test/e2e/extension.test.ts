/**
 * The user story, end to end, in a real VS Code (code-server) from the packaged VSIX: set
 * `inferenceMonitor.modelPath` to a generated model, "Start Model", "Send Prompt…", "Run Benchmark…",
 * "Show Stats Panel", and check the panel's tiles show non-zero throughput and completed requests and
 * that its charts are drawn. Saves a screenshot of the panel for humans.
 *
 * Skips on a developer machine without code-server / Chromium (`bash .ci/install-e2e.sh`); fails in CI.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, it} from "node:test";
import type {FrameLocator, Page} from "playwright-core";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {testCacheDir} from "../helpers/testModels.js";
import {
    answerInputBox, assertE2EPrerequisites, notificationTexts, e2eSkipReason, ensureVsix, launchBrowser, openWorkbench, pickQuickPickItem, repoRoot,
    runCommand, screenshot, startCodeServer, waitForNotification, webviewFrame, type BrowserSession, type CodeServer
} from "./codeServer.js";

const mainFile = path.join(repoRoot, "dist", "extension.js");
const skip = !fs.existsSync(mainFile) ? "dist/extension.js is not built (npm run build)" : e2eSkipReason();

async function tileValue(frame: FrameLocator, metric: string): Promise<number> {
    const text = (await frame.locator(`[data-metric="${metric}"]`).first().textContent()) ?? "";
    return Number(text.replace(/[^\d.eE+-]/g, ""));
}

async function waitForTile(frame: FrameLocator, metric: string, predicate: (value: number) => boolean, timeoutMs = 60_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let value = Number.NaN;
    while (Date.now() < deadline) {
        value = await tileValue(frame, metric).catch(() => Number.NaN);
        if (predicate(value))
            return value;
        await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`tile ${metric} never satisfied the check (last value ${value})`);
}

/** Non-background pixels in a canvas: a drawn chart has many. */
async function drawnPixels(frame: FrameLocator, chart: string): Promise<number> {
    return await frame.locator(`canvas[data-chart="${chart}"]`).evaluate((canvas: HTMLCanvasElement) => {
        const copy = document.createElement("canvas");
        copy.width = canvas.width;
        copy.height = canvas.height;
        const context = copy.getContext("2d", {willReadFrequently: true})!;
        context.drawImage(canvas, 0, 0);
        const {data} = context.getImageData(0, 0, copy.width, copy.height);
        let drawn = 0;
        for (let i = 3; i < data.length; i += 4)
            if (data[i] !== 0) drawn++;
        return drawn;
    });
}

const suiteName = "e2e: the extension in VS Code (code-server) from the VSIX";
if (skip !== false)
    it(suiteName, {skip}, () => undefined);
else describe(suiteName, {timeout: 15 * 60_000}, () => {
    let server: CodeServer | undefined;
    let browser: BrowserSession | undefined;
    let page: Page;
    let modelPath: string;

    async function step<T>(name: string, body: () => Promise<T>): Promise<T> {
        try {
            return await body();
        } catch (error) {
            const shot = browser !== undefined ? await screenshot(page, `extension-${name}-failed`).catch(() => "(none)") : "(no browser)";
            throw new Error(`${name}: ${(error as Error).message}\nscreenshot: ${shot}\n${server?.diagnostics() ?? ""}`, {cause: error});
        }
    }

    before(async () => {
        assertE2EPrerequisites();
        modelPath = await ensureDemoModel({size: "tiny", cacheDir: testCacheDir});
        const workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-e2e-ws-"));
        server = await startCodeServer({
            vsixPath: ensureVsix(),
            workspaceDir,
            settings: {"inferenceMonitor.modelPath": modelPath, "inferenceMonitor.logIntervalS": 2}
        });
        browser = await launchBrowser({viewport: {width: 1600, height: 1000}});
        page = browser.page;
        await openWorkbench(page, server.url);
    });

    after(async () => {
        await browser?.close();
        await server?.stop();
    });

    it("starts the configured model from the Command Palette", async () => {
        await step("start", async () => {
            await runCommand(page, "Inference Monitor: Start Model…");
            // The status bar item appears once the engine is ready; the panel opens beside.
            await page.locator(".statusbar-item", {hasText: /tok\/s · \d+ running/}).first().waitFor({state: "visible", timeout: 120_000});
        });
    });

    it("sends a prompt and streams the completion into an editor", async () => {
        await step("sendPrompt", async () => {
            await runCommand(page, "Inference Monitor: Send Prompt…");
            await answerInputBox(page, "Once upon a time");
            const editor = page.locator(".editor-instance .view-lines").first();
            const deadline = Date.now() + 60_000;
            let text = "";
            while (Date.now() < deadline) {
                text = ((await editor.textContent().catch(() => "")) ?? "").replace(/\u00a0/g, " ");
                if (text.replace(/\s+/g, " ").length > "Once upon a time".length + 20)
                    break;
                await page.waitForTimeout(250);
            }
            assert.ok(text.startsWith("Once upon a time") && text.length > 36, `the completion streamed in: ${JSON.stringify(text.slice(0, 120))}`);
        });
    });

    it("runs a benchmark with a progress notification while the panel fills live", async () => {
        await step("benchmark", async () => {
            await runCommand(page, "Inference Monitor: Run Benchmark…");
            await pickQuickPickItem(page, "Quick");
            // "Run Benchmark…" opens the panel: its throughput tile goes up while the requests run.
            const throughput = await waitForTile(webviewFrame(page), "output_throughput", (value) => value > 0, 120_000);
            assert.ok(throughput > 0, `output throughput ${throughput}`);
            await waitForNotification(page, /Benchmark done: 20 requests/, {timeoutMs: 180_000});
        });
    });

    it("shows the stats: completed requests, latencies, drawn charts", async () => {
        await step("panel", async () => {
            await runCommand(page, "Inference Monitor: Show Stats Panel");
            const frame = webviewFrame(page);
            await frame.locator('[data-metric="completed"]').first().waitFor({state: "visible", timeout: 30_000});
            await checkPanel(frame);
        });
    });

    async function checkPanel(frame: FrameLocator): Promise<void> {
        const completed = await waitForTile(frame, "completed", (value) => value >= 21);
        assert.ok(completed >= 21, "the prompt and the 20 benchmark requests completed");
        assert.ok(await tileValue(frame, "median_ttft_ms") > 0);
        assert.ok(await tileValue(frame, "median_itl_ms") > 0);
        for (const chart of ["throughput", "latency", "requests", "cache", "histograms", "timeline"])
            assert.ok(await drawnPixels(frame, chart) > 500, `chart ${chart} is drawn`);
        // The README's screenshot comes from this one (CONTRIBUTING.md): no toast over the panel, no hover tooltip.
        await runCommand(page, "Notifications: Clear All Notifications", {timeoutMs: 10_000}).catch(() => undefined);
        await page.mouse.move(150, 500);
        await page.waitForTimeout(500);
        const shot = await screenshot(page, "vscode-stats-panel");
        console.log(`screenshot: ${path.relative(repoRoot, shot)}`);
        // The status bar follows the engine: back to 0 running once the work is done.
        await page.locator(".statusbar-item", {hasText: /tok\/s · 0 running/}).first().waitFor({state: "visible", timeout: 15_000});
        const errors = (await notificationTexts(page)).filter((text) => /^Inference Monitor: /.test(text) && !/Benchmark/.test(text));
        assert.deepEqual(errors, [], "no error notifications from the extension");
    }
});
