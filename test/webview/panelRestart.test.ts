/**
 * An engine restarted with another model while the dashboard page is open, in real Chromium: one
 * StatsManager (as StatsPipeline keeps across restarts) behind DashboardServer, a real EngineClient on
 * the generated tiny model (seed 0), stopped and replaced by one on another generated model (seed 1),
 * both in this process (so the new engine has the same pid). The page's header follows without a
 * reload: the new model's name, and an uptime that starts over.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import type {Page} from "playwright-core";
import {DashboardServer} from "../../extension/host/dashboard/dashboardServer.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";
import {chromiumSkipReason, collectPageProblems, launchChromium, type LaunchedBrowser} from "./chromium.js";
import {ensurePanelBuilt, webviewDistDir} from "./panelBuild.js";

/** The header's fields: name → text. */
async function readHeader(page: Page): Promise<Record<string, string>> {
    return await page.$$eval("[data-field]", (elements) => Object.fromEntries(elements.map((e) => [(e as HTMLElement).dataset.field!, e.textContent ?? ""])));
}

async function waitForHeader(page: Page, field: string, pattern: RegExp, timeout = 30_000): Promise<void> {
    await page.waitForFunction(([name, source]) => new RegExp(source).test(document.querySelector(`[data-field="${name}"]`)?.textContent ?? ""),
        [field, pattern.source] as const, {timeout});
}

describe("engine restarted with another model while the dashboard page is open (Chromium, real engines)", {skip: chromiumSkipReason()}, () => {
    let manager: StatsManager;
    let server: DashboardServer;
    let browser: LaunchedBrowser;
    let page: Page;
    let client: EngineClient | undefined;
    let detach: (() => void) | undefined;
    const problems: string[] = [];

    async function startEngine(modelPath: string): Promise<EngineClient> {
        const engine = new EngineClient({modelPath, threads: 1, contextSize: 512, parallel: 2, statsIntervalMs: 200, mode: "inProcess"});
        detach = engine.observe(manager);
        client = engine;
        await engine.start();
        return engine;
    }

    before(async () => {
        ensurePanelBuilt();
        manager = new StatsManager();
        await startEngine(await tinyModelPath());
        // the host says the first engine started 65 s ago, so a restart shows as the uptime starting over
        server = await DashboardServer.listen({port: 0, source: manager, webviewDir: webviewDistDir, engineStartedAt: () => Date.now() - 65_000});
        browser = await launchChromium();
        page = await browser.context.newPage();
        collectPageProblems(page, problems);
        await page.goto(server.url);
    });

    after(async () => {
        await browser?.close();
        await server?.close();
        detach?.();
        await client?.stop();
        await manager?.dispose();
    });

    test("the header names the first model, then the new one after the restart, without a reload", async () => {
        await waitForHeader(page, "model", /\(seed 0\)/);
        await waitForHeader(page, "state", /^idle$/);
        assert.match((await readHeader(page)).uptime!, /^1m \d\ds$/);
        await page.evaluate(() => {
            (window as unknown as {__sameDocument: boolean}).__sameDocument = true;
        });

        const first = client!;
        const firstPid = first.info!.pid;
        await first.stop();
        detach!();
        await waitForHeader(page, "state", /^stopped$/);
        const second = await startEngine(await ensureDemoModel({size: "tiny", seed: 1, cacheDir: testCacheDir}));
        assert.equal(second.info!.pid, firstPid, "in process: the new engine has the same pid");
        assert.match(second.info!.model.name, /\(seed 1\)/);

        await waitForHeader(page, "model", /\(seed 1\)/);
        await waitForHeader(page, "state", /^idle$/);
        const header = await readHeader(page);
        assert.ok(header.model!.startsWith(second.info!.model.name), `header model ${header.model}`);
        assert.match(header.uptime!, /^\d+\.\d s$/, `the uptime starts over with the new engine (${header.uptime})`);
        assert.equal(header.context, "512 tokens");
        assert.ok(await page.evaluate(() => (window as unknown as {__sameDocument?: boolean}).__sameDocument === true), "the page was not reloaded");

        // and the numbers keep coming from the new engine
        const result = await second.generate({prompt: "Once upon a time", maxTokens: 4, ignoreEos: true, temperature: 0}).done;
        assert.equal(result.reason, "length", result.error);
        await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-metric="completed"]')?.dataset.value === "1", undefined, {timeout: 10_000});
    });

    test("no console errors or page errors", () => {
        assert.deepEqual(problems, []);
    });
});
