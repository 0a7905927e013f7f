// Bundles every entry with esbuild into dist/, side by side (see engine/bundlePaths.ts).
// node-llama-cpp (ESM-only, native binaries) and vscode stay external.
import * as esbuild from "esbuild";

const watch = process.argv.includes("--watch");
const production = process.argv.includes("--production");

/** @type {import("esbuild").BuildOptions} */
const nodeOptions = {
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: production ? false : "linked",
    minify: production,
    external: ["node-llama-cpp", "vscode", "bufferutil", "utf-8-validate"],
    logLevel: "warning",
    outdir: "dist",
    entryNames: "[name]"
};

/** The stats panel (webview/): one browser bundle for the VS Code webview and the dashboard page, plus its stylesheet. */
const webviewOptions = {
    bundle: true,
    platform: "browser",
    format: "iife",
    target: "es2022",
    sourcemap: production ? false : "linked",
    minify: production,
    logLevel: "warning",
    outdir: "dist/webview",
    entryPoints: [{in: "webview/main.ts", out: "panel"}, {in: "webview/panel.css", out: "panel"}]
};

const builds = [
    {...nodeOptions, entryPoints: {engineMain: "engine/main.ts", statsWorker: "engine/stats/statsWorker.ts", cli: "cli/main.ts", extension: "extension/vscode/extension.ts"}},
    webviewOptions
];

if (watch) {
    for (const options of builds)
        await (await esbuild.context(options)).watch();
} else
    await Promise.all(builds.map((options) => esbuild.build(options)));
