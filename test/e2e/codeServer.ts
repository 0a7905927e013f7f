/**
 * End-to-end harness: the packaged extension (VSIX) installed into a real VS Code (code-server
 * 4.139.1 = VS Code 1.139.1, run on Node 24), driven through Debian's Chromium with playwright-core.
 *
 * Prerequisites come from `.ci/install-e2e.sh` (code-server in a fixed folder, Chromium at
 * /usr/bin/chromium); `e2ePrerequisites()` says what is missing. Each `startCodeServer` gets fresh
 * temporary user-data, extensions and (unless given) workspace folders, removed again by `stop()`.
 */
import {spawn, spawnSync, type ChildProcess} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {chromium, type Browser, type BrowserContext, type FrameLocator, type Page} from "playwright-core";
import {skipReason} from "../helpers/prerequisites.js";
import {chromiumArgs, chromiumPath, missingChromium} from "../webview/chromium.js";

export const repoRoot = path.resolve(__dirname, "..", "..");
export const artifactsDir = path.join(repoRoot, "test", "e2e", "artifacts");
export const codeServerVersion = "4.139.1";
/** code-server 4.139 runs on Node 24 (this project on Node >= 20): `.ci/install-e2e.sh` puts one here. */
export const e2eNodeVersion = "24.22.3";

/** Where `.ci/install-e2e.sh` installs code-server (same default, same override). */
export const codeServerDir = process.env.INFERENCE_MONITOR_CODE_SERVER_DIR
    ?? path.join(os.homedir(), ".cache", "inference-monitor-e2e", `code-server-${codeServerVersion}`);

/** Where `.ci/install-e2e.sh` installs code-server's Node (same default, same override). */
export const e2eNodeDir = process.env.INFERENCE_MONITOR_E2E_NODE_DIR
    ?? path.join(os.homedir(), ".cache", "inference-monitor-e2e", `node-${e2eNodeVersion}`);

export function findCodeServer(): string | undefined {
    const candidates = [process.env.CODE_SERVER_BIN, path.join(codeServerDir, "node_modules", ".bin", "code-server")];
    return candidates.find((candidate): candidate is string => candidate != null && candidate !== "" && fs.existsSync(candidate));
}

export type E2EPrerequisites = {codeServer?: string, missing: string[]};

/** What the e2e suites need: the built extension (packed into the VSIX), code-server, its Node and Chromium. */
export function e2ePrerequisites(): E2EPrerequisites {
    const codeServer = findCodeServer();
    const missing: string[] = [];
    if (!fs.existsSync(path.join(repoRoot, "dist", "extension.js")))
        missing.push("dist/extension.js (npm run build)");
    if (codeServer == null)
        missing.push(`code-server ${codeServerVersion} (looked in ${codeServerDir}; set CODE_SERVER_BIN or INFERENCE_MONITOR_CODE_SERVER_DIR; bash .ci/install-e2e.sh)`);
    if (!fs.existsSync(path.join(e2eNodeDir, "bin", "node")))
        missing.push(`Node ${e2eNodeVersion} for code-server (looked in ${e2eNodeDir}; set INFERENCE_MONITOR_E2E_NODE_DIR; bash .ci/install-e2e.sh)`);
    missing.push(...missingChromium());
    return {...(codeServer != null ? {codeServer} : {}), missing};
}

/**
 * For `describe(suite, {skip: e2eSkipReason(suite)}, …)`: on a developer's machine a loud skip when a
 * prerequisite is missing; in CI (CI=true) never skips, so the suite fails instead (call
 * `assertE2EPrerequisites()` first thing).
 */
export function e2eSkipReason(suite: string): string | false {
    return skipReason(suite, e2ePrerequisites().missing);
}

export function assertE2EPrerequisites(): {codeServer: string, chromium: string} {
    const {codeServer, missing} = e2ePrerequisites();
    if (codeServer == null || missing.length > 0)
        throw new Error(`e2e prerequisites missing: ${missing.join("; ")}`);
    return {codeServer, chromium: chromiumPath};
}

// --- the VSIX -----------------------------------------------------------------------------------

export const defaultVsixPath = path.join(repoRoot, ".cache", "e2e", "inference-monitor-linux-x64.vsix");

function newestMtime(file: string): number {
    if (!fs.existsSync(file))
        return 0;
    const stat = fs.statSync(file);
    if (!stat.isDirectory())
        return stat.mtimeMs;
    return fs.readdirSync(file).reduce((newest, name) => Math.max(newest, newestMtime(path.join(file, name))), stat.mtimeMs);
}

/** Packs a fixture extension under test/e2e/fixtures/NAME (plain JS, no build) into .cache/e2e/NAME.vsix. */
export function fixtureVsix(name: string): string {
    const dir = path.join(repoRoot, "test", "e2e", "fixtures", name);
    const out = path.join(repoRoot, ".cache", "e2e", `${name}.vsix`);
    fs.mkdirSync(path.dirname(out), {recursive: true});
    const result = spawnSync(process.execPath, [path.join(repoRoot, "node_modules", "@vscode", "vsce", "vsce"), "package", "--no-dependencies",
        "--allow-missing-repository", "--skip-license", "--out", out], {cwd: dir, encoding: "utf8", timeout: 120_000});
    if (result.status !== 0)
        throw new Error(`could not pack the fixture extension ${name}: ${result.stderr}${result.stdout}`);
    return out;
}

/**
 * The packaged extension: `$INFERENCE_MONITOR_VSIX` when set, else `scripts/package.mjs --no-build`
 * (dist/ as built; `npm test` builds first) into .cache/e2e/, reused while it is newer than
 * dist/, package.json, .vscodeignore and the installed node_modules.
 */
export function ensureVsix(options: {force?: boolean} = {}): string {
    const given = process.env.INFERENCE_MONITOR_VSIX;
    if (given != null && given !== "") {
        if (!fs.existsSync(given))
            throw new Error(`INFERENCE_MONITOR_VSIX=${given} does not exist`);
        return given;
    }
    const inputs = ["dist", "package.json", ".vscodeignore", "node_modules/.package-lock.json", "scripts/package.mjs"]
        .map((file) => path.join(repoRoot, file));
    if (options.force !== true && fs.existsSync(defaultVsixPath)
        && fs.statSync(defaultVsixPath).mtimeMs > Math.max(...inputs.map(newestMtime)))
        return defaultVsixPath;
    const result = spawnSync(process.execPath, [path.join(repoRoot, "scripts", "package.mjs"), "--no-build", "--out", defaultVsixPath], {
        cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 10 * 60_000, maxBuffer: 64 * 1024 * 1024
    });
    if (result.status !== 0)
        throw new Error(`scripts/package.mjs failed (${result.status ?? result.signal ?? result.error?.message}):\n${tail(result.stdout + result.stderr, 60)}`);
    return defaultVsixPath;
}

// --- code-server --------------------------------------------------------------------------------

export type CodeServerOptions = {
    vsixPath: string,
    /** Other extensions to install next to ours (test fixtures), as VSIX files. */
    extraVsixPaths?: string[],
    /** Merged over the defaults into User/settings.json. */
    settings?: Record<string, unknown>,
    /** Folder to open; default: a new empty temporary folder. */
    workspaceDir?: string,
    /** Extra environment for code-server (the extension host inherits it). */
    env?: Record<string, string>,
    startTimeoutMs?: number
};

export type CodeServer = {
    url: string,
    userDataDir: string,
    extensionsDir: string,
    workspaceDir: string,
    /** Folder of the installed extension (inside extensionsDir). */
    extensionDir: string,
    /** code-server's stdout + stderr so far (install and run). */
    log(): string,
    /** The log, the extension host's logs and output channels: for failure messages. */
    diagnostics(): string,
    stop(): Promise<void>
};

export const defaultSettings: Record<string, unknown> = {
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": false,
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "git.enabled": false,
    "chat.disableAIFeatures": true,
    // Editors such as settings.json open as tabs, where the tests find them (VS Code 1.139 opens some in a modal by default).
    "workbench.editor.useModal": "off"
};

export async function startCodeServer(options: CodeServerOptions): Promise<CodeServer> {
    const {codeServer} = assertE2EPrerequisites();
    const vsixPath = path.resolve(options.vsixPath);
    if (!fs.existsSync(vsixPath))
        throw new Error(`VSIX not found: ${vsixPath}`);
    const tempRoot = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-e2e-"));
    const userDataDir = path.join(tempRoot, "user-data");
    const extensionsDir = path.join(tempRoot, "extensions");
    const workspaceDir = options.workspaceDir ?? path.join(tempRoot, "workspace");
    for (const dir of [userDataDir, extensionsDir, workspaceDir, path.join(userDataDir, "User")])
        fs.mkdirSync(dir, {recursive: true});
    fs.writeFileSync(path.join(userDataDir, "User", "settings.json"), JSON.stringify({...defaultSettings, ...options.settings}, null, 4));

    const output: string[] = [];
    // code-server's launcher is `#!/usr/bin/env node`: Node 24 first on PATH runs it (and its extension host).
    const env: NodeJS.ProcessEnv = {...process.env, ...options.env, PATH: `${path.join(e2eNodeDir, "bin")}${path.delimiter}${process.env.PATH ?? ""}`};
    delete env.VSCODE_IPC_HOOK_CLI; // never talk to a VS Code this test might be running inside of
    // Its own config file: code-server would otherwise read (and on first run write) ~/.config/code-server/config.yaml.
    const configFile = path.join(tempRoot, "config.yaml");
    fs.writeFileSync(configFile, "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
    const common = ["--config", configFile, "--user-data-dir", userDataDir, "--extensions-dir", extensionsDir];
    const cleanup = () => fs.rmSync(tempRoot, {recursive: true, force: true});

    // Install
    const install = spawnSync(codeServer, [...common, ...[vsixPath, ...(options.extraVsixPaths ?? [])].flatMap((file) => ["--install-extension", file]),
        "--force"], {
        env, encoding: "utf8", timeout: 180_000, maxBuffer: 16 * 1024 * 1024
    });
    output.push(`$ code-server --install-extension ${vsixPath}\n${install.stdout ?? ""}${install.stderr ?? ""}`);
    const extensionDir = findInstalledExtension(extensionsDir);
    if (install.status !== 0 || extensionDir == null) {
        cleanup();
        throw new Error(`code-server could not install ${vsixPath} (exit ${install.status ?? install.signal ?? install.error?.message}):\n${tail(output.join("\n"), 40)}`);
    }

    // Start
    const child = spawn(codeServer, [
        ...common, "--auth", "none", "--bind-addr", "127.0.0.1:0", "--disable-telemetry", "--disable-update-check",
        "--disable-workspace-trust", "--disable-getting-started-override", workspaceDir
    ], {env, stdio: ["ignore", "pipe", "pipe"], detached: true});
    const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "?")));
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => output.push(chunk));
    child.stderr.on("data", (chunk: string) => output.push(chunk));

    let stopped: Promise<void> | undefined;
    const stop = () => stopped ??= (async () => {
        await killProcessGroup(child, exited);
        cleanup();
    })();
    const log = () => output.join("");
    const diagnostics = () => [
        `--- code-server output (last 80 lines) ---\n${tail(log(), 80)}`,
        ...extensionHostLogs(userDataDir).map(([file, text]) => `--- ${path.relative(userDataDir, file)} (last 60 lines) ---\n${tail(text, 60)}`)
    ].join("\n");

    try {
        const url = await waitForUrl(output, exited, options.startTimeoutMs ?? 60_000);
        return {url, userDataDir, extensionsDir, workspaceDir, extensionDir, log, diagnostics, stop};
    } catch (error) {
        const message = `code-server did not start: ${(error as Error).message}\n${diagnostics()}`;
        await stop();
        throw new Error(message, {cause: error});
    }
}

function findInstalledExtension(extensionsDir: string): string | undefined {
    const name = fs.existsSync(extensionsDir)
        ? fs.readdirSync(extensionsDir).find((entry) => entry.startsWith("inference-monitor.inference-monitor-"))
        : undefined;
    return name != null ? path.join(extensionsDir, name) : undefined;
}

async function waitForUrl(output: string[], exited: Promise<number | string>, timeoutMs: number): Promise<string> {
    let exitCode: number | string | undefined;
    void exited.then((code) => {
        exitCode = code;
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
        const match = /HTTP server listening on (http:\/\/[^\s]+)/.exec(output.join(""));
        if (match != null)
            return match[1]!.replace(/\/?$/, "/");
        if (exitCode != null)
            throw new Error(`code-server exited (${exitCode}) before listening`);
        await sleep(100);
    }
    throw new Error(`no "HTTP server listening on" line within ${timeoutMs} ms`);
}

async function killProcessGroup(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
    if (child.pid == null || child.exitCode != null || child.signalCode != null)
        return;
    const signalGroup = (signal: NodeJS.Signals) => {
        try {
            process.kill(-child.pid!, signal); // code-server, its extension host, file watcher, pty host
        } catch {
            // already gone
        }
    };
    signalGroup("SIGTERM");
    const timedOut = await Promise.race([exited.then(() => false), sleep(5_000).then(() => true)]);
    // Whatever outlived the main process (or all of it, after the grace period) goes now.
    signalGroup("SIGKILL");
    if (timedOut)
        await Promise.race([exited, sleep(2_000)]);
}

/** The extension host's log files and output channels, newest session first. */
export function extensionHostLogs(userDataDir: string): Array<[string, string]> {
    const logsDir = path.join(userDataDir, "logs");
    if (!fs.existsSync(logsDir))
        return [];
    const files: string[] = [];
    const walk = (dir: string) => {
        for (const entry of fs.readdirSync(dir, {withFileTypes: true})) {
            const full = path.join(dir, entry.name);
            if (entry.isDirectory())
                walk(full);
            else if (/exthost|remoteexthost|output_logging|Inference Monitor/i.test(full) && entry.name.endsWith(".log"))
                files.push(full);
        }
    };
    walk(logsDir);
    return files.sort().reverse().map((file): [string, string] => [file, fs.readFileSync(file, "utf8")]).filter(([, text]) => text.trim() !== "");
}

// --- browser ------------------------------------------------------------------------------------

export type BrowserSession = {browser: Browser, context: BrowserContext, page: Page, close(): Promise<void>};

/** Headless Chromium with a fresh profile (playwright's own temporary user-data-dir). */
export async function launchBrowser(options: {viewport?: {width: number, height: number}} = {}): Promise<BrowserSession> {
    const {chromium: executablePath} = assertE2EPrerequisites();
    const browser = await chromium.launch({executablePath, headless: true, args: chromiumArgs, timeout: 60_000});
    const context = await browser.newContext({viewport: options.viewport ?? {width: 1400, height: 900}});
    const page = await context.newPage();
    return {
        browser, context, page,
        close: async () => {
            await browser.close().catch(() => undefined);
        }
    };
}

/**
 * Opens the workbench and waits for `.monaco-workbench`, then `settleMs` more: the extension host
 * registers extension commands a few seconds after the workbench appears.
 */
export async function openWorkbench(page: Page, url: string, options: {timeoutMs?: number, settleMs?: number} = {}): Promise<void> {
    await page.goto(url, {waitUntil: "domcontentloaded", timeout: options.timeoutMs ?? 60_000});
    await page.locator(".monaco-workbench").waitFor({state: "visible", timeout: options.timeoutMs ?? 60_000});
    await page.waitForTimeout(options.settleMs ?? 4_000);
}

const quickInput = ".quick-input-widget";
const quickInputBox = `${quickInput} .quick-input-box input`;
const quickInputRows = `${quickInput} .quick-input-list .monaco-list-row`;

async function quickInputVisible(page: Page): Promise<boolean> {
    return await page.locator(quickInput).isVisible();
}

/**
 * Labels of the rows the quick input shows now (e.g. the command palette's matches). A snapshot:
 * right after a command replaced the palette with its own quick pick it may still be the old rows;
 * pickQuickPickItem() polls instead.
 */
export async function quickInputLabels(page: Page): Promise<string[]> {
    const labels = await page.locator(`${quickInputRows} .label-name`).allTextContents();
    return labels.map((label) => label.replace(/\s+/g, " ").trim()).filter((label) => label !== "");
}

/**
 * Opens the command palette (F1) with `query` typed and returns the labels it lists, once `until`
 * accepts them (default: at least one real match), retrying for `timeoutMs`: right after the
 * workbench appears the palette may not know the extensions' commands yet. Leaves the palette open.
 */
export async function paletteMatches(
    page: Page, query: string, options: {timeoutMs?: number, until?: (labels: string[]) => boolean} = {}
): Promise<string[]> {
    const until = options.until ?? ((labels: string[]) => labels.some((label) => label !== "No matching commands"));
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    let labels: string[];
    while (true) {
        await openPalette(page, query, 10_000);
        const attemptDeadline = Math.min(deadline, Date.now() + 3_000);
        do {
            await page.waitForTimeout(250);
            labels = await quickInputLabels(page);
            if (until(labels))
                return labels;
        } while (Date.now() < attemptDeadline);
        if (Date.now() >= deadline)
            return labels;
        await page.keyboard.press("Escape");
        await page.waitForTimeout(1_000);
    }
}

async function openPalette(page: Page, query: string, timeoutMs: number): Promise<void> {
    if (await quickInputVisible(page)) {
        await page.keyboard.press("Escape");
        await page.locator(quickInput).waitFor({state: "hidden", timeout: 5_000}).catch(() => undefined);
    }
    await page.locator(".monaco-workbench").focus().catch(() => undefined);
    await page.keyboard.press("F1");
    const input = page.locator(quickInputBox);
    await input.waitFor({state: "visible", timeout: timeoutMs});
    await input.fill(`>${query}`);
}

/**
 * Runs a command from the palette by its full title ("Inference Monitor: Start Model…"): F1, the
 * title typed, then the row whose label is exactly the title clicked. Retries (palette closed and
 * opened again) until the command is listed, for `timeoutMs`.
 */
export async function runCommand(page: Page, title: string, options: {timeoutMs?: number} = {}): Promise<void> {
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    let lastLabels: string[] = [];
    while (true) {
        await openPalette(page, title, 10_000);
        const rowDeadline = Math.min(deadline, Date.now() + 3_000);
        while (Date.now() < rowDeadline) {
            const rows = page.locator(quickInputRows);
            const count = await rows.count();
            lastLabels = [];
            for (let i = 0; i < count; i++) {
                const row = rows.nth(i);
                const label = ((await row.locator(".label-name").first().textContent().catch(() => null)) ?? "").replace(/\s+/g, " ").trim();
                lastLabels.push(label);
                if (label === title) {
                    await row.click();
                    await waitForPaletteToLeave(page, title);
                    return;
                }
            }
            await page.waitForTimeout(200);
        }
        if (Date.now() >= deadline)
            break;
        await page.keyboard.press("Escape");
        await page.waitForTimeout(1_000);
    }
    await page.keyboard.press("Escape");
    throw new Error(`command "${title}" not found in the command palette; it listed: ${JSON.stringify(lastLabels)}`);
}

/** After a pick the palette closes, or a command's own quick pick / input box replaces it. */
async function waitForPaletteToLeave(page: Page, title: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
        if (!await quickInputVisible(page))
            return;
        const value = await page.locator(quickInputBox).inputValue().catch(() => "");
        if (value !== `>${title}`)
            return;
        await page.waitForTimeout(100);
    }
}

/** Opens a workspace file through Quick Open (Ctrl+P) and waits for its editor tab. */
export async function openFile(page: Page, relativePath: string, options: {timeoutMs?: number} = {}): Promise<void> {
    if (await quickInputVisible(page))
        await page.keyboard.press("Escape");
    await page.locator(".monaco-workbench").focus().catch(() => undefined);
    await page.keyboard.press("Control+P");
    const input = page.locator(quickInputBox);
    await input.waitFor({state: "visible", timeout: options.timeoutMs ?? 15_000});
    await input.fill(relativePath);
    await pickQuickPickItem(page, path.basename(relativePath), {timeoutMs: options.timeoutMs ?? 15_000, typeFilter: false});
    await page.locator(`.tabs-container .tab[aria-label^="${path.basename(relativePath)}"]`).first()
        .waitFor({state: "visible", timeout: options.timeoutMs ?? 15_000});
}

/** Types `text` into the open input box (showInputBox, or a quick pick's filter) and presses Enter. */
export async function answerInputBox(page: Page, text: string, options: {timeoutMs?: number} = {}): Promise<void> {
    const input = page.locator(quickInputBox);
    await input.waitFor({state: "visible", timeout: options.timeoutMs ?? 15_000});
    await input.fill(text);
    await page.waitForTimeout(150);
    await input.press("Enter");
}

/** Picks the item of the open quick pick whose label matches (typed as the filter first). */
export async function pickQuickPickItem(
    page: Page, label: string | RegExp, options: {timeoutMs?: number, typeFilter?: boolean} = {}
): Promise<void> {
    const deadline = Date.now() + (options.timeoutMs ?? 15_000);
    const input = page.locator(quickInputBox);
    await input.waitFor({state: "visible", timeout: options.timeoutMs ?? 15_000});
    if (typeof label === "string" && options.typeFilter !== false)
        await input.fill(label);
    let labels: string[] = [];
    while (Date.now() < deadline) {
        const rows = page.locator(quickInputRows);
        const count = await rows.count();
        labels = [];
        for (let i = 0; i < count; i++) {
            const row = rows.nth(i);
            const text = ((await row.locator(".label-name").first().textContent().catch(() => null)) ?? "").replace(/\s+/g, " ").trim();
            labels.push(text);
            if (typeof label === "string" ? text === label : label.test(text)) {
                await row.click();
                return;
            }
        }
        await page.waitForTimeout(200);
    }
    throw new Error(`quick pick item ${String(label)} not found; listed: ${JSON.stringify(labels)}`);
}

/** Texts of the notifications shown now (toasts and the notification center). */
export async function notificationTexts(page: Page): Promise<string[]> {
    const texts = await page.locator(".notification-list-item-message").allTextContents();
    return [...new Set(texts.map((text) => text.replace(/\s+/g, " ").trim()).filter((text) => text !== ""))];
}

/** Waits until a notification's text matches; returns that text. */
export async function waitForNotification(page: Page, pattern: RegExp, options: {timeoutMs?: number} = {}): Promise<string> {
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    let texts: string[] = [];
    while (Date.now() < deadline) {
        texts = await notificationTexts(page);
        const match = texts.find((text) => pattern.test(text));
        if (match != null)
            return match;
        await page.waitForTimeout(250);
    }
    throw new Error(`no notification matching ${pattern} within ${options.timeoutMs ?? 30_000} ms; shown: ${JSON.stringify(texts)}`);
}

/** The content frame of the (first) ready webview: the stats panel. */
export function webviewFrame(page: Page): FrameLocator {
    return page.frameLocator("iframe.webview.ready").first().frameLocator("#active-frame");
}

/** Saves a PNG to test/e2e/artifacts/NAME.png (git-ignored) and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
    fs.mkdirSync(artifactsDir, {recursive: true});
    const file = path.join(artifactsDir, `${name.replace(/[^\w.-]+/g, "_")}.png`);
    await page.screenshot({path: file});
    return file;
}

function tail(text: string, lines: number): string {
    return text.split("\n").slice(-lines).join("\n");
}

function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
}
