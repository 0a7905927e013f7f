// Runs the test files given (default: all of test/**/*.test.ts but test/gpu) with node's test runner and tsx,
// one file at a time: the machine has two cores and the engine tests measure timing.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

function findTests(dir) {
    return fs.readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory())
            return findTests(full);
        return entry.name.endsWith(".test.ts") ? [full] : [];
    });
}

const args = process.argv.slice(2);
const flags = args.filter((arg) => arg.startsWith("--"));
const given = args.filter((arg) => !arg.startsWith("--"));
// test/gpu needs a GPU: it runs only when named (npm run test:gpu), never in the default run.
const gpuTests = path.join("test", "gpu");
const files = (given.length > 0
    ? given.flatMap((p) => fs.statSync(p).isDirectory() ? findTests(p) : [p])
    : findTests("test").filter((file) => !file.startsWith(gpuTests + path.sep))).sort();
// Suites skipped for a missing prerequisite (test/helpers/prerequisites.ts) add a line here, listed at the end.
const skipLog = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-skips-")), "skipped.txt");
const result = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", ...flags, ...files], {
    stdio: "inherit", env: {...process.env, INFERENCE_MONITOR_SKIP_LOG: skipLog}
});
const skipped = fs.existsSync(skipLog) ? [...new Set(fs.readFileSync(skipLog, "utf8").trim().split("\n"))] : [];
fs.rmSync(path.dirname(skipLog), {recursive: true, force: true});
if (skipped.length > 0)
    process.stderr.write(`\n${skipped.length} suite(s) SKIPPED for a missing prerequisite:\n${skipped.map((line) => `  - ${line}`).join("\n")}\n`);
process.exit(result.status ?? 1);
