// Runs the test files given (default: all of test/**/*.test.ts) with node's test runner and tsx,
// one file at a time: the machine has two cores and the engine tests measure timing.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
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
const files = (given.length > 0 ? given.flatMap((p) => fs.statSync(p).isDirectory() ? findTests(p) : [p]) : findTests("test")).sort();
const result = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", ...flags, ...files], {stdio: "inherit"});
process.exit(result.status ?? 1);
