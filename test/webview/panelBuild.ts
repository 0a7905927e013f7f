/** Makes sure dist/webview holds a panel bundle at least as new as webview/ (builds it when not). */
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";

/** The nearest folder above `from` with a package.json: the repository, from test/webview/ or from a bench bundle in dist-bench/. */
function enclosingPackage(from: string): string {
    for (let dir = from; ; dir = path.dirname(dir)) {
        if (fs.existsSync(path.join(dir, "package.json")))
            return dir;
        if (path.dirname(dir) === dir)
            throw new Error(`no package.json above ${from}`);
    }
}

export const repoRoot = enclosingPackage(__dirname);
export const webviewDistDir = path.join(repoRoot, "dist", "webview");

function newestMtime(dir: string): number {
    let newest = 0;
    for (const entry of fs.readdirSync(dir, {withFileTypes: true})) {
        const full = path.join(dir, entry.name);
        newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : fs.statSync(full).mtimeMs);
    }
    return newest;
}

export function ensurePanelBuilt(): void {
    const bundle = path.join(webviewDistDir, "panel.js");
    const css = path.join(webviewDistDir, "panel.css");
    const builtAt = fs.existsSync(bundle) && fs.existsSync(css) ? Math.min(fs.statSync(bundle).mtimeMs, fs.statSync(css).mtimeMs) : 0;
    if (builtAt >= newestMtime(path.join(repoRoot, "webview")))
        return;
    const result = spawnSync(process.execPath, ["scripts/build.mjs"], {cwd: repoRoot, encoding: "utf8"});
    if (result.status !== 0 || !fs.existsSync(bundle))
        throw new Error(`building the panel failed:\n${result.stdout}\n${result.stderr}`);
}
