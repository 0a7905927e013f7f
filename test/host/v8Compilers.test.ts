/**
 * `serve` turns V8's optimizing compilers off in its own process at run time (cli/v8Compilers.ts): on the
 * Node that runs the tests, a hot function must stay unoptimized after the call, and get optimized when the
 * rule keeps the compilers.
 */
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {test} from "node:test";

/** %GetOptimizationStatus's "optimized" bit (V8's OptimizationStatus::kOptimized). */
const optimizedBit = 1 << 4;

function runHotLoop(threads: number, cores: number): {dropped: boolean, status: number} {
    const code = `const {dropOptimizingCompilers} = require(${JSON.stringify(path.resolve(__dirname, "../../cli/v8Compilers.ts"))});
const dropped = dropOptimizingCompilers(${threads}, ${cores});
function hot(a) { let s = 0; for (let i = 0; i < 1000; i++) s += (a * i) % 7; return s; }
let x = 0;
for (let k = 0; k < 20000; k++) x += hot(k);
console.log(JSON.stringify({dropped, status: %GetOptimizationStatus(hot), x}));`;
    const output = execFileSync(process.execPath, ["--import", "tsx", "--allow-natives-syntax", "-e", code], {encoding: "utf8"});
    return JSON.parse(output) as {dropped: boolean, status: number};
}

test("dropOptimizingCompilers keeps a hot function unoptimized where cores < threads + 3, and leaves V8 alone elsewhere", () => {
    const dropped = runHotLoop(1, 2);
    assert.equal(dropped.dropped, true);
    assert.equal(dropped.status & optimizedBit, 0, `status ${dropped.status.toString(2)}`);
    const kept = runHotLoop(2, 16);
    assert.equal(kept.dropped, false);
    assert.notEqual(kept.status & optimizedBit, 0, `status ${kept.status.toString(2)}`);
});
