/**
 * The user story, end to end, in a real VS Code (code-server) from the packaged VSIX: set
 * `inferenceMonitor.modelPath` to a generated model, "Start Model", "Send Prompt…", "Run Benchmark…",
 * "Show Stats Panel", and check the panel's tiles show non-zero throughput and completed requests and
 * that its charts are drawn. Saves a screenshot of the panel for humans. On the way, the OpenAI-compatible
 * endpoint (`inferenceMonitor.server.port`): `/v1/models` and a chat completion from the `openai` client
 * counted in the panel, `/metrics` there, "Copy API Endpoint", "Set API Key…", and a busy port reported
 * when the setting changes live.
 *
 * Skips on a developer machine without code-server / Chromium (`bash .ci/install-e2e.sh`); fails in CI.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import {after, before, describe, it} from "node:test";
import OpenAI from "openai";
import {startServe} from "../../scripts/serveProcess.js";
import type {FrameLocator, Page} from "playwright-core";
import {demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import {testCacheDir} from "../helpers/testModels.js";
import {defaultPromptCacheMiB} from "../../protocol/engineOptions.js";
import {
    answerInputBox, assertE2EPrerequisites, notificationTexts, e2eSkipReason, ensureVsix, extensionHostLogs, launchBrowser, openWorkbench, pickQuickPickItem, repoRoot,
    fixtureVsix, runCommand, screenshot, startCodeServer, waitForNotification, webviewFrame, type BrowserSession, type CodeServer
} from "./codeServer.js";


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

/** A port nobody listens on now (the OS's pick, released again), or a server holding one when `keep`. */
async function freePort(): Promise<number>;
async function freePort(keep: true): Promise<{port: number, server: net.Server}>;
async function freePort(keep?: true): Promise<number | {port: number, server: net.Server}> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    if (keep === true)
        return {port, server};
    await new Promise((resolve) => server.close(resolve));
    return port;
}

/** Polls `url` until it answers `status` (a fetch that fails counts as status 0). */
async function waitForStatus(url: string, status: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = -1;
    while (Date.now() < deadline) {
        last = await fetch(url).then((response) => response.status, () => 0);
        if (last === status)
            return;
        await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`${url} never answered ${status} (last ${last})`);
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
const skip = e2eSkipReason(suiteName);
if (skip !== false)
    it(suiteName, {skip}, () => undefined);
else describe(suiteName, {timeout: 15 * 60_000}, () => {
    let server: CodeServer | undefined;
    let browser: BrowserSession | undefined;
    let page: Page;
    let modelPath: string;
    let apiPort: number;
    let proxyPort: number;
    let slotDir: string;
    const apiBase = () => `http://127.0.0.1:${apiPort}/v1`;

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
        // With a chat template, so VS Code's chat can offer it tools (the demo's llama2 one: node-llama-cpp documents them).
        modelPath = await ensureDemoModel({size: "tiny", cacheDir: testCacheDir, chatTemplate: demoChatTemplates.llama2});
        apiPort = await freePort();
        proxyPort = await freePort();
        const workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-e2e-ws-"));
        slotDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-e2e-slots-"));
        server = await startCodeServer({
            vsixPath: ensureVsix(),
            extraVsixPaths: [fixtureVsix("lm-client")],
            workspaceDir,
            settings: {"inferenceMonitor.modelPath": modelPath, "inferenceMonitor.logIntervalS": 2, "inferenceMonitor.server.port": apiPort,
                "inferenceMonitor.proxy.port": proxyPort, "inferenceMonitor.prefillChunkTokens": 48, "inferenceMonitor.tilePadding": false,
                "inferenceMonitor.server.slotSavePath": slotDir}
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

    it("serves the model over the OpenAI-compatible API on inferenceMonitor.server.port; the panel counts its requests", async () => {
        await step("api", async () => {
            await runCommand(page, "Inference Monitor: Show Stats Panel");
            const frame = webviewFrame(page);
            await frame.locator('[data-metric="completed"]').first().waitFor({state: "visible", timeout: 30_000});
            const before = await waitForTile(frame, "completed", (value) => Number.isFinite(value));
            // inferenceMonitor.prefillChunkTokens reached the engine: the budget it reports running with.
            await frame.locator("[data-field=prefillChunk]", {hasText: "48 tokens/step"}).first().waitFor({state: "visible", timeout: 15_000});
            // inferenceMonitor.tilePadding: false did too (on by default for this model on the CPU: panel.test.ts).
            assert.equal(await frame.locator("[data-field=prefixCache]").first().textContent(), `on, prompt cache ${defaultPromptCacheMiB} MiB`);

            const models = await fetch(`${apiBase()}/models`);
            assert.equal(models.status, 200);
            const list = await models.json() as {data: Array<{id: string}>};
            assert.deepEqual(list.data.map((model) => model.id), [path.basename(modelPath, ".gguf")]);

            const openai = new OpenAI({baseURL: apiBase(), apiKey: "none", maxRetries: 0, timeout: 60_000});
            const completion = await openai.chat.completions.create({
                model: list.data[0]!.id, messages: [{role: "user", content: "Say hello"}], max_tokens: 12, temperature: 0
            });
            assert.ok((completion.usage?.completion_tokens ?? 0) > 0, `generated tokens: ${JSON.stringify(completion.usage)}`);
            const after = await waitForTile(frame, "completed", (value) => value >= before + 1, 30_000);
            assert.equal(after, before + 1, "the panel counted the API request");
            await frame.locator('[data-client="openai-js"]').first().waitFor({state: "attached", timeout: 15_000});

            // inferenceMonitor.server.slotSavePath: llama.cpp's slot actions save a sequence's state there.
            const saved = await fetch(`http://127.0.0.1:${apiPort}/slots/0?action=save`, {method: "POST",
                headers: {"content-type": "application/json"}, body: JSON.stringify({filename: "e2e.bin"})});
            const savedBody = await saved.json() as {n_written: number};
            assert.equal(saved.status, 200, JSON.stringify(savedBody));
            assert.equal(savedBody.n_written, fs.statSync(path.join(slotDir, "e2e.bin")).size);

            const metrics = await fetch(`http://127.0.0.1:${apiPort}/metrics`);
            assert.equal(metrics.status, 200);
            assert.match(await metrics.text(), /^vllm:request_success_total\{[^}]*\} [1-9]/m);
            assert.equal((await fetch(`http://127.0.0.1:${apiPort}/`)).status, 404, "no dashboard in VS Code (the panel is the UI)");

            // The status bar item's tooltip names the endpoint.
            await page.locator(".statusbar-item", {hasText: /tok\/s · \d+ running/}).first().hover();
            await page.locator(".workbench-hover, .monaco-hover", {hasText: `OpenAI API: ${apiBase()}`}).first().waitFor({state: "visible", timeout: 10_000});
            await page.locator(".workbench-hover, .monaco-hover", {hasText: `Ollama API: ${apiBase().replace(/\/v1$/, "")}`}).first()
                .waitFor({state: "visible", timeout: 10_000});
            await page.mouse.move(150, 500);
        });
    });

    it("copies the endpoint from the Command Palette", async () => {
        await step("copyApiEndpoint", async () => {
            await browser!.context.grantPermissions(["clipboard-read", "clipboard-write"], {origin: new URL(server!.url).origin});
            await runCommand(page, "Inference Monitor: Copy API Endpoint");
            const text = await waitForNotification(page, /copied http:\/\/127\.0\.0\.1:\d+\/v1/);
            assert.ok(text.includes(`copied ${apiBase()} `), text);
            const clipboard = await page.evaluate(() => navigator.clipboard.readText());
            assert.equal(clipboard, apiBase());
            // The same port speaks Ollama's API (what Copilot Chat's Ollama models list the model from).
            const ollamaAddress = apiBase().replace(/\/v1$/, "");
            assert.ok(text.includes(`Ollama clients: ${ollamaAddress}`), text);
            const tags = await (await fetch(`${ollamaAddress}/api/tags`)).json() as {models: Array<{name: string}>};
            assert.equal(tags.models.length, 1, JSON.stringify(tags));
            assert.match(tags.models[0]!.name, /:latest$/);
        });
    });

    it("requires the key set with Set API Key…, and accepts any again once it is removed", async () => {
        await step("setApiKey", async () => {
            await runCommand(page, "Inference Monitor: Set API Key…");
            await answerInputBox(page, "e2e-secret-key");
            await waitForNotification(page, /API key set/);
            assert.equal((await fetch(`${apiBase()}/models`)).status, 401, "no key: 401");
            const withKey = await fetch(`${apiBase()}/models`, {headers: {Authorization: "Bearer e2e-secret-key"}});
            assert.equal(withKey.status, 200, "the key: 200");
            await runCommand(page, "Inference Monitor: Set API Key…");
            await answerInputBox(page, "");
            await waitForNotification(page, /API key removed/);
            assert.equal((await fetch(`${apiBase()}/models`)).status, 200, "no key needed again");
        });
    });

    /** Changes a user setting the way a user does: settings.json in an editor, replaced (pasted) and saved. */
    async function setUserSetting(key: string, value: unknown): Promise<void> {
        const settingsFile = path.join(server!.userDataDir, "User", "settings.json");
        const settings = {...JSON.parse(fs.readFileSync(settingsFile, "utf8")) as Record<string, unknown>, [key]: value};
        await runCommand(page, "Preferences: Open User Settings (JSON)");
        await page.locator('.tabs-container .tab[aria-label^="settings.json"]').first().waitFor({state: "visible", timeout: 15_000});
        await page.locator(".editor-instance .view-lines").first().click();
        await page.evaluate((text) => navigator.clipboard.writeText(text), JSON.stringify(settings, null, 4));
        await page.keyboard.press("Control+A");
        await page.keyboard.press("Control+V");
        await page.keyboard.press("Control+S");
        const deadline = Date.now() + 10_000;
        // VS Code writes the file in place: a read can catch it empty or half written, so that reads as "not yet".
        const current = (): unknown => {
            try {
                return (JSON.parse(fs.readFileSync(settingsFile, "utf8")) as Record<string, unknown>)[key];
            } catch {
                return undefined;
            }
        };
        while (current() !== value) {
            if (Date.now() > deadline)
                throw new Error(`settings.json did not get ${key} = ${JSON.stringify(value)}`);
            await page.waitForTimeout(100);
        }
        await runCommand(page, "View: Close Editor");
        await page.waitForTimeout(1_000); // the stats panel, active again, takes the focus: let it settle before the next palette
    }

    it("follows inferenceMonitor.server.port live; a busy port is an error naming the port and the setting", async () => {
        await step("busyPort", async () => {
            const busy = await freePort(true);
            try {
                await setUserSetting("inferenceMonitor.server.port", busy.port);
                const text = await waitForNotification(page, new RegExp(`port ${busy.port} is already in use`));
                assert.match(text, /inferenceMonitor\.server\.port/);
                await waitForStatus(`${apiBase()}/models`, 0); // the old port is closed, no other one taken
            } finally {
                await new Promise((resolve) => busy.server.close(resolve));
            }
            await setUserSetting("inferenceMonitor.server.port", apiPort);
            await waitForStatus(`${apiBase()}/models`, 200);
            await runCommand(page, "Notifications: Clear All Notifications", {timeoutMs: 10_000});
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

    it("is a chat model for other extensions (vscode.lm): a fixture extension streams its answer, counted under vscode.lm", async () => {
        await step("languageModel", async () => {
            await runCommand(page, "LM Client: Ask the Local Model");
            const done = await waitForNotification(page, /\[lm-client\] .* done/, {timeoutMs: 60_000});
            const match = /model=(\S+) vendor=inference-monitor promptTokens=(\d+) chars=(\d+) done/.exec(done);
            assert.ok(match !== null, done);
            assert.equal(match[1], path.basename(modelPath, ".gguf"), "the running model, by its stable id");
            assert.ok(Number(match[2]) > 0, "provideTokenCount: the model's own tokenizer");
            assert.ok(Number(match[3]) > 0, "the streamed answer arrived");
            await runCommand(page, "Inference Monitor: Show Stats Panel");
            const frame = webviewFrame(page);
            const row = frame.locator('[data-client="vscode.lm"]').first();
            await row.locator('[data-col="requests"]', {hasText: /^1$/}).waitFor({state: "attached", timeout: 30_000});
            // Cancelled by its caller mid-stream, after the first text: VS Code forwards the cancellation to the provider
            // (1.139 does; 1.117 and older dropped a cancel made after the request had started), which cancels the engine
            // request: it ends as `abort` long before its 1000 tokens.
            await runCommand(page, "LM Client: Ask the Local Model, Then Cancel");
            const cancelled = await waitForNotification(page, /\[lm-client\] .* chars=\d+ cancelled/, {timeoutMs: 60_000});
            assert.ok(Number(/chars=(\d+)/.exec(cancelled)![1]) > 0, `text arrived before the cancel: ${cancelled}`);
            await runCommand(page, "Inference Monitor: Show Stats Panel"); // the answer's editor took its place
            await row.locator('[data-col="requests"]', {hasText: /^2$/}).waitFor({state: "attached", timeout: 30_000});
            await row.locator('[data-col="errors"]', {hasText: /^0 \(\+1 aborted\)$/}).waitFor({state: "attached", timeout: 30_000});
            const generated = Number(/\/\s*(\d+)/.exec(await row.locator('[data-col="tokens"]').textContent() ?? "")?.[1]);
            assert.ok(generated < 48 + 1000, `the cancelled request stopped early (generated tokens of both: ${generated})`);
            // Tool calling, as VS Code's agent mode uses it: the model must call the tool; the result goes back and it answers.
            await runCommand(page, "LM Client: Make the Local Model Call a Tool");
            const tool = await waitForNotification(page, /\[lm-client\] tool=.* tool done/, {timeoutMs: 60_000});
            assert.match(tool, /tool=get_weather input=\{"city":"(Paris|Rome)"\} text=0 answer chars=[1-9]\d* tool done/);
        });
    });

    it("runs a benchmark with a progress notification while the panel fills live", async () => {
        await step("benchmark", async () => {
            await runCommand(page, "Inference Monitor: Run Benchmark…");
            await pickQuickPickItem(page, "Quick");
            // "Run Benchmark…" opens the panel, which fills with the benchmark's requests. (The Quick run can end
            // in about a second, before the panel has loaded, so the rate tiles may already be back at 0: read
            // the completed count, which holds. Idle rate tiles showing the last active rate is issue I.)
            await waitForNotification(page, /Benchmark done: 20 requests/, {timeoutMs: 180_000});
            const completed = await waitForTile(webviewFrame(page), "completed", (value) => value >= 20, 60_000);
            assert.ok(completed >= 20, `completed ${completed}`);
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

    it("attaches to a running server (a second serve, vLLM-compatible); the panel and status bar show it; Show Stats For… goes back", async () => {
        await step("attachServer", async () => {
            const upstream = await startServe(modelPath, ["--parallel", "2", "--threads", "1", "--context-size", "1024", "--log-interval", "3600"]);
            try {
                const origin = upstream.baseUrl.replace(/\/v1$/, "");
                await runCommand(page, "Inference Monitor: Attach to Server…");
                await pickQuickPickItem(page, /Enter a URL/, {typeFilter: false});
                // the URL box replaces the picker: wait for its prompt, or the text goes to the closing picker
                await page.locator(".quick-input-widget .quick-input-message", {hasText: "The server's base URL"}).first()
                    .waitFor({state: "visible", timeout: 15_000});
                await answerInputBox(page, origin);
                await waitForNotification(page, new RegExp(`watching vLLM at ${origin.replace(/[.]/g, "\\.")}`));
                const frame = webviewFrame(page);
                await frame.locator("[data-field=servers]", {hasText: `${origin} up`}).first().waitFor({state: "visible", timeout: 30_000});
                const openai = new OpenAI({baseURL: upstream.baseUrl, apiKey: "none", maxRetries: 0, timeout: 60_000});
                for (let i = 0; i < 3; i++)
                    await openai.completions.create({model: "m", prompt: `Hello ${i}`, max_tokens: 8, ...{ignore_eos: true}});
                // TTFT of the server's own requests, estimated from its histogram buckets
                await frame.locator('[data-metric="median_ttft_ms"]', {hasText: /^≈ \d/}).first().waitFor({state: "visible", timeout: 30_000});
                await page.locator(".statusbar-item", {hasText: origin}).first().waitFor({state: "visible", timeout: 15_000});
                const settings = JSON.parse(fs.readFileSync(path.join(server!.userDataDir, "User", "settings.json"), "utf8")) as Record<string, unknown>;
                assert.deepEqual(settings["inferenceMonitor.targets"], [{url: origin}], "the URL in settings, and no key");

                // The panel's own picker shows the choice; picking the engine there switches back too.
                const picker = frame.locator("[data-field=source]").first();
                assert.equal(await picker.inputValue(), origin);
                await picker.selectOption("engine");
                await frame.locator("[data-field=servers]").first().waitFor({state: "hidden", timeout: 15_000});
                await page.locator(".statusbar-item", {hasText: origin}).first().waitFor({state: "hidden", timeout: 15_000});
                await runCommand(page, "Inference Monitor: Show Stats For…");
                await pickQuickPickItem(page, new RegExp(origin.replace(/[.]/g, "\\.")), {typeFilter: false});
                await frame.locator("[data-field=servers]", {hasText: `${origin} up`}).first().waitFor({state: "visible", timeout: 15_000});
                assert.equal(await picker.inputValue(), origin);
                await runCommand(page, "Inference Monitor: Show Stats For…");
                await pickQuickPickItem(page, /Local engine/, {typeFilter: false});
                await frame.locator("[data-field=servers]").first().waitFor({state: "hidden", timeout: 15_000});
                await page.locator(".statusbar-item", {hasText: origin}).first().waitFor({state: "hidden", timeout: 15_000});
                assert.ok(await tileValue(frame, "completed") >= 22, "the local engine's numbers are back");

                // The monitoring proxy in front of the same server: a request through it shows as the proxy's.
                await runCommand(page, "Inference Monitor: Start Monitoring Proxy…");
                await pickQuickPickItem(page, new RegExp(origin.replace(/[.]/g, "\\.")), {typeFilter: false});
                await waitForNotification(page, new RegExp(`monitoring proxy at http://127\\.0\\.0\\.1:${proxyPort}/v1`));
                await frame.locator("[data-field=servers]", {hasText: `${origin} up`}).first().waitFor({state: "visible", timeout: 15_000});
                assert.equal(await picker.inputValue(), `proxy:${origin}`);
                const viaProxy = new OpenAI({baseURL: `http://127.0.0.1:${proxyPort}/v1`, apiKey: "none", maxRetries: 0, timeout: 60_000});
                const answer = await viaProxy.chat.completions.create({model: "m", messages: [{role: "user", content: "Hi"}], max_tokens: 6,
                    ...{ignore_eos: true}});
                assert.equal(answer.usage?.completion_tokens, 6);
                assert.equal(await waitForTile(frame, "completed", (value) => value >= 1, 30_000), 1, "the proxy's own count: one request");
                // measured by the proxy, exactly: no ≈ (the tile refreshes its percentiles once per sample)
                assert.ok(await waitForTile(frame, "median_ttft_ms", (value) => value > 0, 15_000) > 0);
                assert.doesNotMatch(await frame.locator('[data-metric="median_ttft_ms"]').first().textContent() ?? "", /≈/);
                await runCommand(page, "Inference Monitor: Stop Monitoring Proxy");
                await waitForNotification(page, /monitoring proxy stopped/);
                await waitForStatus(`http://127.0.0.1:${proxyPort}/v1/models`, 0);
                await frame.locator("[data-field=servers]").first().waitFor({state: "hidden", timeout: 15_000});
            } finally {
                await upstream.stop();
            }
        });
    });

    /** Pids of the engine processes the installed extension spawned (its dist/engineMain.js). */
    function enginePids(): number[] {
        const entry = path.join(server!.extensionDir, "dist", "engineMain.js");
        return fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((name) => {
            try {
                return fs.readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0").includes(entry) ? [Number(name)] : [];
            } catch {
                return [];
            }
        });
    }

    async function waitForEnginePid(other: number | undefined, timeoutMs = 60_000): Promise<number> {
        const deadline = Date.now() + timeoutMs;
        while (Date.now() < deadline) {
            const pids = enginePids().filter((pid) => pid !== other);
            if (pids.length === 1)
                return pids[0]!;
            await page.waitForTimeout(200);
        }
        throw new Error(`no single new engine process (other than ${other}): ${JSON.stringify(enginePids())}`);
    }

    const couldNotStart = (texts: string[]) => texts.filter((text) => /could not start|crashed/.test(text));

    it("restarts a crashed engine by itself; after four crashes in a row says so once and stops; Start Model twice in a row and Cancel while loading stay quiet", async () => {
        await step("crashRestart", async () => {
            await runCommand(page, "Notifications: Clear All Notifications", {timeoutMs: 10_000}).catch(() => undefined);
            let pid = await waitForEnginePid(undefined);
            for (let restart = 1; restart <= 3; restart++) {
                process.kill(pid, "SIGKILL");
                pid = await waitForEnginePid(pid);
                await page.locator(".statusbar-item", {hasText: /tok\/s · 0 running/}).first().waitFor({state: "visible", timeout: 60_000});
                assert.deepEqual(couldNotStart(await notificationTexts(page)), [], `restart ${restart}: no notification, the engine is back`);
            }
            process.kill(pid, "SIGKILL");
            const report = await waitForNotification(page, /the engine crashed 4 times within 5m/, {timeoutMs: 30_000});
            assert.match(report, /SIGKILL/);
            await page.waitForTimeout(3000);
            assert.deepEqual(enginePids(), [], "not restarted after giving up");
            assert.equal((await notificationTexts(page)).filter((text) => /crashed/.test(text)).length, 1, "one notification");

            await runCommand(page, "Notifications: Clear All Notifications", {timeoutMs: 10_000}).catch(() => undefined);
            // Start Model twice in a row: the second replaces the first while it loads, nothing fails.
            await runCommand(page, "Inference Monitor: Start Model…");
            await runCommand(page, "Inference Monitor: Start Model…");
            await page.locator(".statusbar-item", {hasText: /tok\/s · 0 running/}).first().waitFor({state: "visible", timeout: 120_000});
            await page.waitForTimeout(1000);
            assert.equal(enginePids().length, 1, "one engine");
            // Cancel on the loading notification while the restarted engine loads: it stops, and nothing "failed".
            await runCommand(page, "Inference Monitor: Restart Engine");
            const loading = page.locator(".notification-list-item", {hasText: /Inference Monitor: loading/}).first();
            await loading.locator(".monaco-button", {hasText: "Cancel"}).first().click({timeout: 10_000});
            const stoppedBy = Date.now() + 15_000;
            while (enginePids().length > 0 && Date.now() < stoppedBy)
                await page.waitForTimeout(200);
            assert.deepEqual(enginePids(), [], "cancelled while loading: no engine left");
            await page.waitForTimeout(1000);
            assert.deepEqual(couldNotStart(await notificationTexts(page)), [], "no error notifications");
            // The output channel says so (written to its log file with a short delay).
            const logged = Date.now() + 10_000;
            const cutShort = () => extensionHostLogs(server!.userDataDir).some(([, text]) => /ended before the model loaded/.test(text));
            while (!cutShort() && Date.now() < logged)
                await page.waitForTimeout(250);
            assert.ok(cutShort(), "the load was cut short, not finished and then stopped");
        });
    });

    async function checkPanel(frame: FrameLocator): Promise<void> {
        const completed = await waitForTile(frame, "completed", (value) => value >= 22);
        assert.ok(completed >= 22, "the API request, the prompt and the 20 benchmark requests completed");
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
        // The status bar follows the engine: back to 0 running once the work is done, showing the rate of the last active period.
        const idle = page.locator(".statusbar-item", {hasText: /last active [\d.]+ tok\/s · 0 running/}).first();
        await idle.waitFor({state: "visible", timeout: 15_000});
        const lastRate = Number(/last active ([\d.]+) tok/.exec(await idle.textContent() ?? "")?.[1]);
        assert.ok(lastRate > 0, `the last active period's rate: ${lastRate}`);
        const errors = (await notificationTexts(page)).filter((text) => /^Inference Monitor: /.test(text) && !/Benchmark/.test(text));
        assert.deepEqual(errors, [], "no error notifications from the extension");
    }
});
