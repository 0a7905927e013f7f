// Bundles every entry with esbuild into dist/, side by side (see engine/bundlePaths.ts).
// node-llama-cpp (ESM-only, native binaries) and vscode stay external.
//
//   node scripts/build.mjs [--production] [--watch]
//
// --watch (`npm run watch`, F5's preLaunchTask): rebuilds on change and prints "[watch] build started"
// / "[watch] build finished" around each rebuild, and every error or warning as two lines
// ("✘ [ERROR] text", "    file:line:column:"): .vscode/tasks.json's problem matcher reads those.
import fs from "node:fs";
import * as esbuild from "esbuild";

const watch = process.argv.includes("--watch");
const production = process.argv.includes("--production");

// `vsce package` runs "vscode:prepublish" (this script, --production); scripts/package.mjs has built
// dist/ already (or was told not to) and sets this so that a VSIX build means one build.
if (process.env.npm_lifecycle_event === "vscode:prepublish" && process.env.INFERENCE_MONITOR_PREPUBLISH_BUILT === "1") {
    console.log("[build] dist/ was built by scripts/package.mjs; vscode:prepublish has nothing to do");
    process.exit(0);
}

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

/**
 * The `npm run bench:*` scripts, bundled as the product is: a benchmark's host (bench:peer's IPC target runs the host in
 * the script's own process) then runs the code users run, not sources under tsx, whose loader thread and its garbage
 * collections share the CPUs being measured. In dist-bench/, beside dist/, so the scripts find dist/'s entries
 * (engine/bundlePaths.ts) and the repository (`..`); never in the VSIX.
 */
const manifest = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"));
/** The bundles package.json's scripts run (`node … dist-bench/NAME.js`), each from scripts/NAME.ts. */
const benchScripts = [...new Set(Object.values(manifest.scripts).flatMap((command) =>
    [...command.matchAll(/dist-bench\/(\w+)\.js/g)].map((match) => match[1])))];
const benchOptions = {
    ...nodeOptions,
    external: [...nodeOptions.external, "playwright-core"],
    outdir: "dist-bench",
    entryPoints: Object.fromEntries(benchScripts.map((name) => [name, `scripts/${name}.ts`]))
};

const builds = [
    {...nodeOptions, entryPoints: {engineMain: "engine/main.ts", statsWorker: "engine/stats/statsWorker.ts", gpuProbe: "engine/gpu/gpuProbeMain.ts", cli: "cli/main.ts", extension: "extension/vscode/extension.ts"}},
    webviewOptions,
    ...production ? [] : [benchOptions]
];

/** One "[watch] build started" when the first bundle starts rebuilding, one "[watch] build finished" when the last one is done. */
function watchReporter() {
    let active = 0;
    let errors = 0;
    let warnings = 0;
    const print = (kind, messages) => {
        for (const {text, location} of messages) {
            console.log(`✘ [${kind}] ${text.split("\n")[0]}`);
            if (location != null)
                console.log(`    ${location.file}:${location.line}:${location.column + 1}:`);
        }
    };
    return {
        name: "watch-reporter",
        setup(build) {
            build.onStart(() => {
                if (active++ === 0) {
                    errors = warnings = 0;
                    console.log(`[watch] build started ${new Date().toLocaleTimeString()}`);
                }
            });
            build.onEnd((result) => {
                print("ERROR", result.errors);
                print("WARNING", result.warnings);
                errors += result.errors.length;
                warnings += result.warnings.length;
                if (--active === 0)
                    console.log(`[watch] build finished: ${errors} error(s), ${warnings} warning(s)`);
            });
        }
    };
}

if (watch) {
    const reporter = watchReporter();
    // The reporter prints every message in the problem matcher's format; esbuild's own log would repeat them.
    const contexts = await Promise.all(builds.map((options) => esbuild.context({...options, logLevel: "silent", plugins: [reporter]})));
    await Promise.all(contexts.map((context) => context.watch()));
} else
    await Promise.all(builds.map((options) => esbuild.build(options)));
