/**
 * The benchmark scripts' command lines, run as `npm run bench:* -- …` runs them (their bundles in dist-bench/, built by
 * `npm run build`, from the repo root):
 * `--help` lists every flag the script takes (exit 0), and a typo is one line naming it plus the help on stderr (exit 2),
 * not parseArgs' TypeError stack trace; so is a bad value (`--repeats 0`), not the script's own Error and its stack.
 * The flags are written out here, so that one dropped from a script shows.
 */
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

const repoRoot = path.resolve(__dirname, "../..");

type Script = {file: string, npmScript: string, flags: string[]};

const scripts: Script[] = [
    // Runs itself again on the engine's libuv pool size (engineThreadpool.ts): the flags are read before that.
    {file: "scripts/benchPeer.ts", npmScript: "bench:peer",
        flags: ["json", "repeats", "quick", "kernels-only", "dtype", "cpu-backend", "points", "prefix-cache", "targets", "warmups"]},
    {file: "scripts/benchEngine.ts", npmScript: "bench:engine", flags: ["json", "models", "dtype", "tokens", "repeats", "threads"]},
    {file: "scripts/benchIngest.ts", npmScript: "bench:ingest", flags: ["seconds", "running", "output-len", "json"]}
];

type Run = {code: number | null, stdout: string, stderr: string};

function runScript(file: string, args: string[]): Promise<Run> {
    return new Promise((resolve, reject) => {
        const bundle = path.join("dist-bench", `${path.basename(file, ".ts")}.js`);
        const child = spawn(process.execPath, [bundle, ...args], {cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"]});
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => void (stdout += chunk));
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => void (stderr += chunk));
        // Reading the flags takes well under a second; a script that went on to benchmark would not end in time.
        const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
        child.once("error", reject);
        child.once("exit", (code) => {
            clearTimeout(timer);
            resolve({code, stdout, stderr});
        });
    });
}

/** A thrown error's trace: its class name, or a stack frame line. */
function assertNoStackTrace(text: string): void {
    assert.doesNotMatch(text, /TypeError|\w*Error:|ERR_PARSE_ARGS|^ +at /m);
}

/**
 * Bad flag values, checked by each script's interpret callback (or a module it calls, as bench:peer's --points in
 * peerSelection.ts) before anything runs: `flag` is what the one-line message must name.
 */
const badValues: Array<{file: string, npmScript: string, args: string[], flag: string}> = [
    {file: "scripts/benchPeer.ts", npmScript: "bench:peer", args: ["--repeats", "0"], flag: "repeats"},
    {file: "scripts/benchPeer.ts", npmScript: "bench:peer", args: ["--dtype", "x"], flag: "dtype"},
    {file: "scripts/benchPeer.ts", npmScript: "bench:peer", args: ["--warmups", "-1"], flag: "warmups"},
    {file: "scripts/benchPeer.ts", npmScript: "bench:peer", args: ["--points", "2"], flag: "points"},
    {file: "scripts/benchEngine.ts", npmScript: "bench:engine", args: ["--dtype", "x"], flag: "dtype"},
    {file: "scripts/benchEngine.ts", npmScript: "bench:engine", args: ["--models", "small,huge"], flag: "models"},
    {file: "scripts/benchIngest.ts", npmScript: "bench:ingest", args: ["--seconds", "0"], flag: "seconds"}
];

test("every npm bench:* script runs its bundle in dist-bench/, built from scripts/ by npm run build", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as {scripts: Record<string, string>};
    const benches = Object.entries(manifest.scripts).filter(([name]) => name.startsWith("bench:"));
    assert.ok(benches.length >= 10, benches.map(([name]) => name).join(", "));
    for (const [name, command] of benches) {
        const bundle = /^npm run build && node (?:--[\w-]+(?:=\S+)? )*dist-bench\/(\w+)\.js$/.exec(command)?.[1];
        assert.ok(bundle !== undefined, `${name}: ${command}`);
        assert.ok(fs.existsSync(path.join(repoRoot, "scripts", `${bundle}.ts`)), `${name}: no scripts/${bundle}.ts`);
        assert.ok(fs.existsSync(path.join(repoRoot, "dist-bench", `${bundle}.js`)), `${name}: npm run build wrote no dist-bench/${bundle}.js`);
    }
});

describe("benchmark scripts' command lines", () => {
    for (const {file, npmScript, flags} of scripts) {
        test(`${file} --help: the usage and every flag, each with a description, on stdout; exit 0`, async () => {
            const run = await runScript(file, ["--help"]);
            assert.equal(run.code, 0, run.stderr);
            assert.equal(run.stderr, "");
            assert.ok(run.stdout.startsWith(`Usage: npm run ${npmScript} -- [options]\n`), run.stdout);
            for (const flag of [...flags, "help"])
                assert.match(run.stdout, new RegExp(`^ {2}(?:-\\w, | {4})--${flag}(?: \\S+)? {2,}\\S`, "m"), `--${flag}`);
            assertNoStackTrace(run.stdout);
        });

        test(`${file} --no-such-flag: one line naming it, then the usage, on stderr; exit 2`, async () => {
            const run = await runScript(file, ["--no-such-flag"]);
            assert.equal(run.code, 2, run.stderr);
            assert.equal(run.stdout, "");
            const [first, blank, usage] = run.stderr.split("\n");
            assert.match(first!, new RegExp(`^npm run ${npmScript} --: .*'--no-such-flag'`));
            assert.equal(blank, "");
            assert.equal(usage, `Usage: npm run ${npmScript} -- [options]`);
            assertNoStackTrace(run.stderr);
        });
    }

    for (const {file, npmScript, args, flag} of badValues) {
        test(`${file} ${args.join(" ")}: one line naming --${flag}, then the usage, on stderr; exit 2`, async () => {
            const run = await runScript(file, args);
            assert.equal(run.code, 2, run.stderr);
            assert.equal(run.stdout, "");
            const [first, blank, usage] = run.stderr.split("\n");
            assert.match(first!, new RegExp(`^npm run ${npmScript} --: --${flag}\\b`));
            assert.ok(first!.includes(JSON.stringify(args[1])), first);
            assert.equal(blank, "");
            assert.equal(usage, `Usage: npm run ${npmScript} -- [options]`);
            assertNoStackTrace(run.stderr);
        });
    }
});
