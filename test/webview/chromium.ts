/**
 * Debian's Chromium through playwright-core, for the panel tests and the e2e suites: one place that
 * says where Chromium is (`INFERENCE_MONITOR_CHROMIUM`, else /usr/bin/chromium). Where it is missing
 * the tests skip loudly — except on CI (`CI=true`), where they fail.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {chromium, type BrowserContext, type Page} from "playwright-core";
import {skipReason} from "../helpers/prerequisites.js";

/** The one environment variable naming Chromium for every test suite. */
export const chromiumPathVariable = "INFERENCE_MONITOR_CHROMIUM";
export const chromiumPath = process.env[chromiumPathVariable] ?? "/usr/bin/chromium";

/** What is missing for Chromium, for a skip reason or an error. */
export function missingChromium(): string[] {
    return fs.existsSync(chromiumPath) ? [] : [`Chromium at ${chromiumPath} (install Debian's chromium with bash .ci/install-e2e.sh, or set ${chromiumPathVariable})`];
}

export const chromiumArgs = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-quic"
];

/** `false` when Chromium is there (or on CI: then a missing one fails the test); else the skip message, printed. */
export function chromiumSkipReason(suite = "panel tests in Chromium"): string | false {
    return skipReason(suite, missingChromium());
}

export type LaunchedBrowser = {context: BrowserContext, close(): Promise<void>};

/** A fresh browser with a new, empty profile (deleted on close). */
export async function launchChromium(options: {colorScheme?: "light" | "dark", viewport?: {width: number, height: number}} = {}): Promise<LaunchedBrowser> {
    const missing = missingChromium();
    if (missing.length > 0)
        throw new Error(`missing ${missing.join("; ")}`);
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

/** Collects the page's console errors and warnings and uncaught errors into `problems`, for a test to assert none. */
export function collectPageProblems(page: Page, problems: string[]): void {
    page.on("console", (message) => {
        if (message.type() === "error" || message.type() === "warning")
            problems.push(`${message.type()}: ${message.text()}`);
    });
    page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
}
