// Builds the linux-x64 VSIX and checks it.
//
//   node scripts/package.mjs [--no-build] [--no-verify] [--no-cuda] [--out FILE]
//
// 1. `node scripts/build.mjs --production` (skipped with --no-build: packages dist/ as it is); vsce's
//    own "vscode:prepublish" build (the same command, for a bare `vsce package`/`vsce publish`) is
//    then skipped, so one build per VSIX;
// 2. `vsce package --target linux-x64`: vsce adds the production dependencies (`npm list
//    --production`), .vscodeignore prunes them to what runs: node-llama-cpp's JS and its runtime
//    dependencies, and only the linux-x64 CPU, Vulkan and CUDA binaries (--no-cuda: without CUDA,
//    ~31 MB instead of ~175 MB);
// 3. checks the VSIX (skipped with --no-verify), read with yauzl: required files present (the
//    manifest's main, LICENSE, icon and walkthrough media included), nothing from other
//    platforms, no sources/maps/llama.cpp sources, every dependency of every packaged package
//    resolvable inside the VSIX, and, unpacked in a temporary folder, node-llama-cpp imported from
//    there loading its own linux-x64 binary with getLlama({gpu: false, build: "never"}).
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";
import yauzl from "yauzl";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const target = "linux-x64";
const requiredBinaryPackages = ["linux-x64", "linux-x64-vulkan", "linux-x64-cuda"];
/** Dependency edges .vscodeignore cuts on purpose (build-from-source tooling, node-llama-cpp's own CLI, bundled code). */
const prunedEdges = {
    "": ["chart.js"],
    "node-llama-cpp": ["cmake-js", "yargs", "node-addon-api", "typescript"]
};

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name) => {
    const index = args.indexOf(name);
    return index >= 0 ? args[index + 1] : undefined;
};
const build = !flag("--no-build");
const verify = !flag("--no-verify");
const cuda = !flag("--no-cuda");
const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
const outFile = path.resolve(option("--out") ?? path.join(root, `${manifest.name}-${target}-${manifest.version}.vsix`));
const binaryPackages = cuda ? requiredBinaryPackages : requiredBinaryPackages.filter((name) => name !== "linux-x64-cuda");

const started = performance.now();
const seconds = (since) => ((performance.now() - since) / 1000).toFixed(1) + " s";
const log = (message) => console.log(`[package] ${message}`);
function fail(message) {
    console.error(`[package] FAILED: ${message}`);
    process.exit(1);
}
function run(command, commandArgs, options = {}) {
    const result = spawnSync(command, commandArgs, {cwd: root, stdio: ["ignore", "inherit", "inherit"], ...options});
    if (result.error)
        fail(`${command} ${commandArgs.join(" ")}: ${result.error.message}`);
    if (result.status !== 0)
        fail(`${command} ${commandArgs.join(" ")} exited with ${result.status ?? result.signal}`);
    return result;
}

// --- 1. build -----------------------------------------------------------------------------------
if (build) {
    const since = performance.now();
    run(process.execPath, ["scripts/build.mjs", "--production"]);
    log(`built dist/ (production) in ${seconds(since)}`);
}
const mainFile = path.join(root, manifest.main ?? "dist/extension.js");
if (!fs.existsSync(mainFile))
    fail(`${path.relative(root, mainFile)} (the manifest's "main") does not exist; run "node scripts/build.mjs --production"`);

// --- 2. vsce package ----------------------------------------------------------------------------
const nodeLlamaCppVersion = JSON.parse(fs.readFileSync(path.join(root, "node_modules/node-llama-cpp/package.json"), "utf8")).version;
for (const name of binaryPackages) {
    const file = path.join(root, "node_modules/@node-llama-cpp", name, "package.json");
    if (!fs.existsSync(file))
        fail(`node_modules/@node-llama-cpp/${name} is missing: the VSIX needs it; run "npm ci" on linux x64 (optional dependencies included)`);
    const version = JSON.parse(fs.readFileSync(file, "utf8")).version;
    if (version !== nodeLlamaCppVersion)
        fail(`@node-llama-cpp/${name} is ${version}, node-llama-cpp is ${nodeLlamaCppVersion}; run "npm ci"`);
}

let ignoreFile = path.join(root, ".vscodeignore");
let tempIgnoreDir;
if (!cuda) {
    tempIgnoreDir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-vscodeignore-"));
    const withoutCuda = path.join(tempIgnoreDir, ".vscodeignore");
    fs.writeFileSync(withoutCuda, fs.readFileSync(ignoreFile, "utf8") + "\n# --no-cuda\nnode_modules/@node-llama-cpp/linux-x64-cuda/**\n");
    ignoreFile = withoutCuda;
}
const vsceArgs = ["package", "--target", target, "--out", outFile, "--no-yarn", "--ignoreFile", ignoreFile];
if (manifest.repository == null)
    vsceArgs.push("--allow-missing-repository");
// vsce writes a temporary file, renamed to outFile once checked: a concurrent reader (another test
// process reusing the VSIX) never sees a half-written one, and a bad VSIX never lands at outFile.
fs.mkdirSync(path.dirname(outFile), {recursive: true});
const partialFile = path.join(path.dirname(outFile), `.${path.basename(outFile, ".vsix")}.${process.pid}.partial.vsix`);
vsceArgs[vsceArgs.indexOf(outFile)] = partialFile;
process.on("exit", () => fs.rmSync(partialFile, {force: true}));
{
    const since = performance.now();
    const vsce = path.join(path.dirname(fileURLToPath(import.meta.resolve("@vscode/vsce/package.json"))), "vsce");
    run(process.execPath, [vsce, ...vsceArgs], {env: {...process.env, INFERENCE_MONITOR_PREPUBLISH_BUILT: "1"}});
    log(`vsce package in ${seconds(since)}`);
}
if (tempIgnoreDir != null)
    fs.rmSync(tempIgnoreDir, {recursive: true, force: true});

// --- 3. verify ----------------------------------------------------------------------------------
if (verify) {
    const since = performance.now();
    const zip = await openZip(partialFile);
    const entries = zip.entries;
    const files = entries.map((entry) => entry.name).filter((name) => name.startsWith("extension/")).map((name) => name.slice("extension/".length));
    const fileSet = new Set(files);
    const problems = [];

    const walkthroughMedia = (manifest.contributes?.walkthroughs ?? [])
        .flatMap((walkthrough) => walkthrough.steps ?? [])
        .flatMap((step) => [step.media?.image, step.media?.markdown, step.media?.svg])
        .flatMap((media) => (media == null ? [] : typeof media === "string" ? [media] : Object.values(media)));
    const required = [
        "package.json",
        "LICENSE.txt",
        path.posix.normalize(manifest.main ?? "dist/extension.js"),
        // the entries the extension forks: the engine, its stats worker, the GPU self-test (engine/bundlePaths.ts)
        ...["engineMain.js", "statsWorker.js", "gpuProbe.js"].map((entry) => `dist/${entry}`),
        ...(manifest.icon == null ? [] : [path.posix.normalize(manifest.icon)]),
        ...walkthroughMedia.map((file) => path.posix.normalize(file)),
        "node_modules/node-llama-cpp/package.json",
        "node_modules/node-llama-cpp/dist/index.js",
        "node_modules/node-llama-cpp/llama/binariesGithubRelease.json",
        ...binaryPackages.map((name) => `node_modules/@node-llama-cpp/${name}/bins/${name}/llama-addon.node`)
    ];
    for (const file of required)
        if (!fileSet.has(file))
            problems.push(`missing ${file}`);

    const allowedTop = /^(package\.json|(readme|license|changelog)(\.(md|txt))?|dist\/.*|media\/.*|node_modules\/.*)$/i;
    const binaryPackagePattern = new RegExp(`^node_modules/@node-llama-cpp/(?!(${binaryPackages.join("|")})/)`);
    const forbidden = [
        [binaryPackagePattern, "another platform's (or an unwanted) node-llama-cpp binary package"],
        [/^node_modules\/node-llama-cpp\/llama\/(gitRelease\.bundle|addon\/|cmake\/|llama\.cpp\/|localBuilds\/|xpack\/|toolchains\/)/, "llama.cpp sources / build inputs"],
        [/\.(ts|tsx|mts|cts)$/, "TypeScript source or declarations"],
        [/\.map$/, "source map"],
        [/^node_modules\/(typescript|cmake-js|node-addon-api|chart\.js)\//, "a dependency pruned on purpose"]
    ];
    for (const file of files) {
        if (!allowedTop.test(file))
            problems.push(`unexpected top-level file ${file}`);
        for (const [pattern, what] of forbidden)
            if (pattern.test(file)) {
                problems.push(`${file}: ${what}`);
                break;
            }
    }
    problems.push(...await checkDependencyClosure(zip));

    const sizes = new Map();
    for (const entry of entries) {
        const match = /^extension\/(node_modules\/(@[^/]+\/)?[^/]+|[^/]+)/.exec(entry.name);
        const key = match?.[1] ?? entry.name;
        const size = sizes.get(key) ?? {files: 0, raw: 0, zipped: 0};
        size.files++;
        size.raw += entry.size;
        size.zipped += entry.compressedSize;
        sizes.set(key, size);
    }
    const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1) + " MiB";
    log(`${entries.length} files; largest parts (zipped / unpacked):`);
    for (const [key, size] of [...sizes].sort((a, b) => b[1].zipped - a[1].zipped).slice(0, 6))
        log(`  ${mb(size.zipped).padStart(10)} / ${mb(size.raw).padStart(10)}  ${key} (${size.files} files)`);

    if (problems.length === 0)
        problems.push(...await smokeTest(zip));
    zip.close();
    if (problems.length > 0)
        fail(`the VSIX is not right:\n  ${problems.slice(0, 50).join("\n  ")}${problems.length > 50 ? `\n  … ${problems.length - 50} more` : ""}`);
    log(`verified in ${seconds(since)}: binaries ${binaryPackages.map((name) => `@node-llama-cpp/${name}`).join(", ")}`);
}

fs.renameSync(partialFile, outFile);
log(`${path.relative(process.cwd(), outFile) || outFile}: ${(fs.statSync(outFile).size / 1024 / 1024).toFixed(1)} MiB, total ${seconds(started)}`);

// --- helpers ------------------------------------------------------------------------------------

/** A zip file (the VSIX) opened with yauzl: its entries, and each entry's contents on demand. */
async function openZip(file) {
    const zipfile = await new Promise((resolve, reject) =>
        yauzl.open(file, {lazyEntries: true, autoClose: false}, (error, opened) => (error ? reject(error) : resolve(opened))));
    const entries = await new Promise((resolve, reject) => {
        const list = [];
        zipfile.on("entry", (entry) => {
            list.push({name: entry.fileName, size: entry.uncompressedSize, compressedSize: entry.compressedSize, entry});
            zipfile.readEntry();
        });
        zipfile.once("end", () => resolve(list));
        zipfile.once("error", reject);
        zipfile.readEntry();
    });
    /** @returns {Promise<Buffer>} */
    const read = (item) => new Promise((resolve, reject) => {
        zipfile.openReadStream(item.entry, (error, stream) => {
            if (error)
                return reject(error);
            const chunks = [];
            stream.on("data", (chunk) => chunks.push(chunk));
            stream.once("end", () => resolve(Buffer.concat(chunks)));
            stream.once("error", reject);
        });
    });
    return {entries, read, close: () => zipfile.close()};
}

/**
 * Every `dependencies` entry of every packaged package (and of the extension itself, for
 * node-llama-cpp) must resolve, the way Node resolves it, to a package inside the VSIX — except
 * the edges cut on purpose (prunedEdges).
 */
async function checkDependencyClosure(zip) {
    const problems = [];
    const packageJsons = zip.entries.filter((entry) => /^extension\/(node_modules\/(@[^/]+\/)?[^/]+\/)*package\.json$/.test(entry.name));
    const present = new Set(packageJsons.map((entry) => path.posix.dirname(entry.name)));
    for (const entry of packageJsons) {
        const dir = path.posix.dirname(entry.name);
        const pkg = JSON.parse((await zip.read(entry)).toString("utf8"));
        const isRoot = dir === "extension";
        const deps = isRoot ? ["node-llama-cpp"] : Object.keys(pkg.dependencies ?? {});
        const cut = prunedEdges[isRoot ? "" : pkg.name] ?? [];
        for (const dep of deps) {
            if (cut.includes(dep) || (pkg.optionalDependencies ?? {})[dep] != null)
                continue;
            let found = false;
            for (let base = dir; ; base = path.posix.dirname(base)) {
                if (present.has(`${base === "." ? "" : base + "/"}node_modules/${dep}`.replace(/^\//, ""))) {
                    found = true;
                    break;
                }
                if (base === "." || base === "extension" || base === "")
                    break;
            }
            if (!found)
                problems.push(`${dir.slice("extension/".length) || "(extension)"} depends on ${dep}, which is not in the VSIX`);
        }
    }
    return problems;
}

/** Unpacks the VSIX and loads node-llama-cpp from it in a fresh Node process. */
async function smokeTest(zip) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-vsix-"));
    try {
        for (const entry of zip.entries) {
            if (!entry.name.startsWith("extension/") || entry.name.endsWith("/"))
                continue;
            const file = path.join(dir, entry.name);
            fs.mkdirSync(path.dirname(file), {recursive: true});
            fs.writeFileSync(file, await zip.read(entry));
        }
        const extensionDir = path.join(dir, "extension");
        const script = `
            import fs from "node:fs";
            import {pathToFileURL} from "node:url";
            const {getLlama, LlamaLogLevel} = await import(pathToFileURL(process.argv[2] + "/node_modules/node-llama-cpp/dist/index.js").href);
            const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: LlamaLogLevel.error});
            const addons = [...new Set(fs.readFileSync("/proc/self/maps", "utf8").split("\\n").map((line) => line.split(/\\s+/)[5]).filter((file) => file?.endsWith(".node")))];
            console.log(JSON.stringify({gpu: llama.gpu, buildType: llama.buildType, addons}));
            await llama.dispose();
        `;
        // A file, not --eval: node-llama-cpp forks a binary test process that inherits execArgv.
        const probeFile = path.join(dir, "probe.mjs");
        fs.writeFileSync(probeFile, script);
        const result = spawnSync(process.execPath, [probeFile, extensionDir], {
            cwd: dir, encoding: "utf8", timeout: 120_000, env: {...process.env, NODE_PATH: ""}
        });
        if (result.status !== 0)
            return [`node-llama-cpp from the unpacked VSIX did not load (exit ${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`];
        const line = result.stdout.trim().split("\n").at(-1) ?? "";
        let probe;
        try {
            probe = JSON.parse(line);
        } catch {
            return [`unexpected output from the node-llama-cpp probe:\n${result.stdout}\n${result.stderr}`];
        }
        const llamaAddons = probe.addons.filter((file) => file.endsWith("llama-addon.node"));
        if (probe.gpu !== false || probe.buildType !== "prebuilt" || llamaAddons.length === 0 || !llamaAddons.every((file) => file.startsWith(extensionDir + "/")))
            return [`node-llama-cpp from the unpacked VSIX loaded something unexpected: ${line}`];
        log(`node-llama-cpp loads from the unpacked VSIX: gpu=${probe.gpu}, ${probe.buildType} ${path.relative(extensionDir, llamaAddons[0])}`);
        return [];
    } finally {
        fs.rmSync(dir, {recursive: true, force: true});
    }
}
