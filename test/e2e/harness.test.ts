/**
 * Proves the e2e harness (codeServer.ts) works against the real packaged extension: packs the VSIX
 * (scripts/package.mjs, from dist/ as built), installs it into code-server, opens the workbench in
 * headless Chromium, finds the extension's commands in the palette, activates it, and reaches a
 * webview's content. Kept generic: the extension's commands are still being written.
 *
 * On a developer's machine skips loudly when dist/extension.js is not built or code-server or Chromium
 * is missing (`bash .ci/install-e2e.sh`); in CI (CI=true) missing prerequisites fail.
 */
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, it} from "node:test";
import {
    assertE2EPrerequisites, e2eSkipReason, ensureVsix, extensionHostLogs, launchBrowser, openFile, openWorkbench, paletteMatches, repoRoot,
    runCommand, screenshot, startCodeServer, webviewFrame, type BrowserSession, type CodeServer
} from "./codeServer.js";

type ContributedCommand = {command: string, title: string, category?: string};
const manifest = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as {
    name: string, publisher: string, version: string, main: string,
    contributes?: {commands?: ContributedCommand[], menus?: {commandPalette?: Array<{command: string, when?: string}>}}
};
const extensionId = `${manifest.publisher}.${manifest.name}`;
const commands = manifest.contributes?.commands ?? [];
const fullTitle = (command: ContributedCommand) => command.category != null ? `${command.category}: ${command.title}` : command.title;
/** Commands the palette shows before anything ran: no `when` clause in menus.commandPalette. */
const alwaysInPalette = commands.filter((command) =>
    !(manifest.contributes?.menus?.commandPalette ?? []).some((entry) => entry.command === command.command && entry.when != null));

const suiteName = "e2e harness: packaged extension in code-server";
const skip = e2eSkipReason(suiteName);
if (skip !== false)
    it(suiteName, {skip}, () => undefined);
else describe(suiteName, {timeout: 10 * 60_000}, () => {
    let server: CodeServer | undefined;
    let browser: BrowserSession | undefined;
    let workspaceDir: string | undefined;
    const timings: string[] = [];
    const started = performance.now();
    const lap = (what: string) => timings.push(`${what} at ${((performance.now() - started) / 1000).toFixed(1)} s`);

    /** Runs a step; on failure adds a screenshot and code-server's / the extension host's logs. */
    async function step(name: string, body: () => Promise<void>): Promise<void> {
        try {
            await body();
            lap(name);
        } catch (error) {
            const shot = browser != null ? await screenshot(browser.page, `harness-${name}-failed`).catch(() => "(no screenshot)") : "(no browser)";
            const details = server != null ? server.diagnostics() : "(code-server not started)";
            throw new Error(`${name}: ${(error as Error).message}\nscreenshot: ${shot}\n${details}`, {cause: error});
        }
    }

    before(async () => {
        assertE2EPrerequisites(); // in CI a missing build, code-server or Chromium fails here instead of skipping
        const vsixPath = ensureVsix();
        lap(`VSIX ${(fs.statSync(vsixPath).size / 1024 / 1024).toFixed(1)} MiB`);
        workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-e2e-workspace-"));
        fs.writeFileSync(path.join(workspaceDir, "webview-check.md"), "# Harness webview check\n\nRendered by the markdown preview.\n");
        server = await startCodeServer({vsixPath, workspaceDir});
        lap("code-server installed the VSIX and listens");
        browser = await launchBrowser();
        await step("open-workbench", () => openWorkbench(browser!.page, server!.url));
    });

    after(async () => {
        await browser?.close();
        await server?.stop();
        if (workspaceDir != null)
            fs.rmSync(workspaceDir, {recursive: true, force: true});
        console.log(`e2e harness timings: ${timings.join(", ")}`);
    });

    it("installs the VSIX with node-llama-cpp's linux-x64 binaries, and node-llama-cpp loads from there", () => {
        const extensionDir = server!.extensionDir;
        const installed = JSON.parse(fs.readFileSync(path.join(extensionDir, "package.json"), "utf8")) as {version: string};
        assert.equal(installed.version, manifest.version);
        assert.ok(fs.existsSync(path.join(extensionDir, manifest.main)), `${manifest.main} is installed`);
        const binaries = fs.readdirSync(path.join(extensionDir, "node_modules", "@node-llama-cpp")).sort();
        assert.ok(binaries.includes("linux-x64"), `CPU binaries installed (${binaries.join(", ")})`);
        assert.deepEqual(binaries.filter((name) => !/^linux-x64(-vulkan|-cuda)?$/.test(name)), [], "no other platforms' binaries");

        const probe = `
            const {getLlama, LlamaLogLevel} = await import(${JSON.stringify(path.join(extensionDir, "node_modules", "node-llama-cpp", "dist", "index.js"))});
            const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: LlamaLogLevel.error});
            console.log(JSON.stringify({gpu: llama.gpu, buildType: llama.buildType}));
            await llama.dispose();
        `;
        const probeFile = path.join(workspaceDir!, "probe.mjs"); // a file: node-llama-cpp forks a test process with our execArgv
        fs.writeFileSync(probeFile, probe);
        const result = spawnSync(process.execPath, [probeFile], {cwd: os.tmpdir(), encoding: "utf8", timeout: 120_000});
        fs.rmSync(probeFile);
        assert.equal(result.status, 0, `getLlama from the installed extension failed:\n${result.stdout}\n${result.stderr}`);
        assert.deepEqual(JSON.parse(result.stdout.trim().split("\n").at(-1)!), {gpu: false, buildType: "prebuilt"});
    });

    it("lists the extension's commands in the command palette", async () => {
        await step("palette", async () => {
            const page = browser!.page;
            const expected = alwaysInPalette.map(fullTitle);
            assert.ok(expected.length > 0, "the manifest contributes commands shown without a when clause");
            const category = alwaysInPalette[0]!.category ?? "";
            const labels = await paletteMatches(page, `${category}:`, {until: (shown) => expected.every((title) => shown.includes(title))});
            await screenshot(page, "harness-palette");
            await page.keyboard.press("Escape");
            for (const title of expected)
                assert.ok(labels.includes(title), `"${title}" is in the palette (it listed ${JSON.stringify(labels)})`);
        });
    });

    it("reaches a webview's content through webviewFrame() (markdown preview)", async () => {
        await step("webview", async () => {
            const page = browser!.page;
            await openFile(page, "webview-check.md");
            await runCommand(page, "Markdown: Open Preview to the Side");
            await webviewFrame(page).getByRole("heading", {name: "Harness webview check"}).waitFor({state: "visible", timeout: 30_000});
            await screenshot(page, "harness-webview");
            await runCommand(page, "View: Close All Editors");
        });
    });

    it("activates the extension from one of its commands", async () => {
        await step("activate", async () => {
            const page = browser!.page;
            const command = alwaysInPalette.find((entry) => entry.command.endsWith(".showStats")) ?? alwaysInPalette[0]!;
            await runCommand(page, fullTitle(command));
            await page.waitForTimeout(1_000);
            await page.keyboard.press("Escape"); // in case the command opened a quick pick
            // The extension host logs each activation (and each failed one) in remoteexthost.log.
            const logLines = () => extensionHostLogs(server!.userDataDir)
                .filter(([file]) => /exthost\.log$/.test(file)).flatMap(([, text]) => text.split("\n"));
            const deadline = Date.now() + 30_000;
            while (!logLines().some((line) => line.includes(`_doActivateExtension ${extensionId},`)) && Date.now() < deadline)
                await page.waitForTimeout(250);
            await runCommand(page, "Developer: Show Running Extensions");
            await page.waitForTimeout(1_000);
            await screenshot(page, "harness-running-extensions");
            assert.ok(logLines().some((line) => line.includes(`_doActivateExtension ${extensionId},`)),
                `the extension host activated ${extensionId}:\n${server!.diagnostics()}`);
            const activationFailures = logLines().filter((line) => line.includes(extensionId) && /\b(failed|error)\b/i.test(line));
            assert.deepEqual(activationFailures, [], "no activation failure in the extension host log");
        });
    });
});
