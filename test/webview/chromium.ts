/**
 * Debian's Chromium through playwright-core, for the panel tests. Where /usr/bin/chromium is missing
 * the tests skip with a message — except on CI (`CI=true`), where they fail.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {chromium, type BrowserContext} from "playwright-core";

export const chromiumPath = process.env.INFERENCE_MONITOR_CHROMIUM ?? "/usr/bin/chromium";

export const chromiumArgs = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-quic"
];

/** `false` when Chromium is there (or on CI: then a missing one fails the test); else the skip message. */
export function chromiumSkipReason(): string | false {
    if (fs.existsSync(chromiumPath) || process.env.CI === "true")
        return false;
    return `${chromiumPath} not found: install Debian's chromium (bash .ci/install-e2e.sh) to run the panel tests`;
}

export type LaunchedBrowser = {context: BrowserContext, close(): Promise<void>};

/** A fresh browser with a new, empty profile (deleted on close). */
export async function launchChromium(options: {colorScheme?: "light" | "dark", viewport?: {width: number, height: number}} = {}): Promise<LaunchedBrowser> {
    if (!fs.existsSync(chromiumPath))
        throw new Error(`${chromiumPath} not found (CI=true: the panel tests must run; install chromium with bash .ci/install-e2e.sh)`);
    const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-chromium-"));
    const context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: chromiumPath, args: chromiumArgs, headless: true, acceptDownloads: true,
        viewport: options.viewport ?? {width: 1400, height: 1000}, colorScheme: options.colorScheme ?? "light"
    });
    return {
        context,
        close: async () => {
            await context.close();
            fs.rmSync(userDataDir, {recursive: true, force: true});
        }
    };
}
