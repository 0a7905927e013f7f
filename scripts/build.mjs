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

const builds = [
    {...nodeOptions, entryPoints: {engineMain: "engine/main.ts", statsWorker: "engine/stats/statsWorker.ts", cli: "extension/host/cli/main.ts"}}
];

if (watch) {
    for (const options of builds)
        await (await esbuild.context(options)).watch();
} else
    await Promise.all(builds.map((options) => esbuild.build(options)));
