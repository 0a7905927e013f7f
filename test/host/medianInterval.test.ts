/** The benchmarks' median interval: order statistics chosen by the binomial(n, ½) law, checked by hand and by simulation. */
import assert from "node:assert/strict";
import {test} from "node:test";
import {Xoshiro128, nextUnit} from "../../common/seededRandom.js";
import {formatMedianInterval, medianInterval} from "../../extension/host/bench/medianInterval.js";

test("the interval is the textbook order statistics: n=9 → [x(2), x(8)] at 1 − 20/512; n=5 → [min, max] at 15/16", () => {
    const nine = [0.95, 1.02, 0.90, 0.99, 1.10, 0.97, 0.98, 0.93, 1.01];
    assert.deepEqual(medianInterval(nine), {median: 0.98, low: 0.93, high: 1.02, coverage: 1 - 20 / 512, n: 9});
    // n = 20: P(Bin(20, ½) ≤ 5) = 21700 / 2^20, so k = 6 covers 1 − 2·0.0207 = 95.86 %; k = 7 would be 88.5 %.
    const twenty = Array.from({length: 20}, (_, i) => i + 1);
    const interval = medianInterval(twenty);
    assert.equal(interval.low, 6);
    assert.equal(interval.high, 15);
    assert.ok(Math.abs(interval.coverage - (1 - 2 * 21700 / 2 ** 20)) < 1e-12);
    assert.equal(interval.median, 10.5);
    // Too few values for 95 %: the widest interval, with the coverage it has.
    assert.deepEqual(medianInterval([3, 1, 2, 5, 4]), {median: 3, low: 1, high: 5, coverage: 1 - 2 / 32, n: 5});
    assert.deepEqual(medianInterval([7]), {median: 7, low: 7, high: 7, coverage: 0, n: 1});
    // A lower confidence narrows it: n = 9 at 80 % is [x(3), x(7)] (82.0 %).
    const eighty = medianInterval(nine, 0.8);
    assert.deepEqual([eighty.low, eighty.high], [0.95, 1.01]);
    assert.ok(Math.abs(eighty.coverage - (1 - 92 / 512)) < 1e-12);
    assert.throws(() => medianInterval([]), /no values/);
    assert.throws(() => medianInterval([1, 2], 1), /between 0 and 1/);
});

test("over 4000 seeded skewed samples the 95 % interval holds the true median at least 95 % of the time", () => {
    const rng = new Xoshiro128(11);
    // Exponential(1): skewed like run-time noise; its median is ln 2.
    const trueMedian = Math.LN2;
    for (const n of [9, 20, 41]) {
        let covered = 0;
        const trials = 4000;
        for (let trial = 0; trial < trials; trial++) {
            const sample = Array.from({length: n}, () => -Math.log(1 - nextUnit(rng)));
            const interval = medianInterval(sample);
            if (interval.low <= trueMedian && trueMedian <= interval.high)
                covered++;
        }
        const expected = medianInterval(Array.from({length: n}, (_, i) => i)).coverage;
        // The exact coverage, within 4 binomial standard errors of the simulation.
        const standardError = Math.sqrt(expected * (1 - expected) / trials);
        assert.ok(Math.abs(covered / trials - expected) < 4 * standardError, `n=${n}: covered ${covered / trials}, expected ${expected}`);
        assert.ok(expected >= 0.95, `n=${n}: coverage ${expected}`);
    }
});

test("formatMedianInterval prints the median, the interval and its coverage", () => {
    assert.equal(formatMedianInterval(medianInterval([0.95, 1.02, 0.90, 0.99, 1.10, 0.97, 0.98, 0.93, 1.01])),
        "0.980 (96.0 % interval 0.930–1.020, 9 pairs)");
    assert.equal(formatMedianInterval(medianInterval([1, 2, 3, 4, 5]), 1, "runs"), "3.0 (93.7 % interval 1.0–5.0, 5 runs)");
});
