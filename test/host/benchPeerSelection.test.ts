/** bench:peer's partial matrix (--points, --prefix-cache, --targets) and its per-repeat ratios. */
import assert from "node:assert/strict";
import {test} from "node:test";
import {parsePeerSelection, parsePoints, parseTargets} from "../../scripts/peerSelection.js";
import {describePairedRatios, pairedRatios, type PeerRunMetrics} from "../../scripts/peerRatios.js";

test("--points keeps the matrix's order, Poisson last and only with concurrency 8", () => {
    assert.deepEqual(parsePoints("1,4,8,poisson").map((p) => [p.concurrency, p.rate]), [[1, Infinity], [4, Infinity], [8, Infinity], [undefined, NaN]]);
    assert.deepEqual(parsePoints("poisson, 8").map((p) => p.concurrency), [8, undefined]);
    assert.deepEqual(parsePoints("4,1").map((p) => p.concurrency), [1, 4]);
    assert.throws(() => parsePoints("poisson"), /poisson needs 8/);
    assert.throws(() => parsePoints("2"), /unknown point "2"; choose from 1, 4, 8, poisson/);
    assert.throws(() => parsePoints("1,,4"), /an empty item/);
    assert.throws(() => parsePoints("1,1"), /given twice/);
});

test("--targets always keeps llama-server first; --prefix-cache is on, off or both", () => {
    assert.deepEqual(parseTargets("http,ipc"), ["llama-server", "ipc", "http"]);
    assert.deepEqual(parseTargets("ipc"), ["llama-server", "ipc"]);
    assert.throws(() => parseTargets("llama-server"), /unknown target "llama-server".*always runs/);
    assert.deepEqual(parsePeerSelection({points: "1", prefixCache: "on", targets: "ipc"}),
        {points: [{concurrency: 1, rate: Infinity}], caches: [true], targets: ["llama-server", "ipc"]});
    assert.deepEqual(parsePeerSelection({points: "1", prefixCache: "both", targets: "ipc"}).caches, [true, false]);
    assert.deepEqual(parsePeerSelection({points: "1", prefixCache: "off", targets: "ipc"}).caches, [false]);
    assert.throws(() => parsePeerSelection({points: "1", prefixCache: "yes", targets: "ipc"}), /expected on, off or both, got "yes"/);
});

test("per-repeat ratios pair each run with llama-server's of the same repeat", () => {
    const run = (repeat: number, target: string, throughput: number, ttft: number, p99: number): PeerRunMetrics =>
        ({repeat, target, output_throughput: throughput, median_ttft_ms: ttft, p99_itl_ms: p99});
    // The machine slows down from repeat to repeat; both sides with it. The medians' ratio would mix repeats, the pairs do not.
    const cell = [
        run(0, "llama-server", 600, 10, 2), run(0, "ipc", 540, 9, 2.4),
        run(1, "llama-server", 500, 12, 3), run(1, "ipc", 475, 12, 3),
        run(2, "llama-server", 400, 15, 4), run(2, "ipc", 380, 16.5, 5),
        run(3, "ipc", 100, 99, 99) // its llama-server run failed: no pair
    ];
    const paired = pairedRatios(cell, "ipc")!;
    assert.deepEqual([paired.throughput.median, paired.throughput.low, paired.throughput.high, paired.throughput.n], [0.95, 0.9, 0.95, 3]);
    assert.deepEqual([paired.ttft.low, paired.ttft.median, paired.ttft.high], [0.9, 1, 1.1]);
    assert.deepEqual([paired.p99_itl.low, paired.p99_itl.median, paired.p99_itl.high], [1, 1.2, 1.25]);
    assert.equal(pairedRatios(cell, "http"), undefined);
    assert.match(describePairedRatios(paired),
        /^ipc per repeat: throughput 0\.950 \(75\.0 % interval 0\.900–0\.950, 3 repeats\), TTFT p50 1\.000 .*ITL p99 1\.200 /);
});
