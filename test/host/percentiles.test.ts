/** The one percentile implementation: quickselect (any order) agrees with numpy's linear method on a full sort. */
import assert from "node:assert/strict";
import {test} from "node:test";
import {Xoshiro128, nextUnit} from "../../common/seededRandom.js";
import {percentile, quantileOfSorted, summarize} from "../../extension/host/stats/percentiles.js";

function byFullSort(values: number[]): [number | null, number | null, number | null, number] {
    const sorted = [...values].sort((a, b) => a - b);
    return [quantileOfSorted(sorted, 0.5), quantileOfSorted(sorted, 0.9), quantileOfSorted(sorted, 0.99), sorted.at(-1)!];
}

test("summarize and percentile match a full sort on 3000 seeded random sets, with ties", () => {
    const rng = new Xoshiro128(7);
    for (let trial = 0; trial < 3000; trial++) {
        const n = 1 + (rng.nextUint32() % 400);
        const values = Array.from({length: n}, () => nextUnit(rng) < 0.3 ? rng.nextUint32() % 5 : nextUnit(rng) * 100);
        const summary = summarize(values);
        const expected = byFullSort(values);
        assert.deepEqual([summary.p50, summary.p90, summary.p99, summary.max], expected, `set ${trial}`);
        assert.deepEqual([percentile(values, 50), percentile(values, 90), percentile(values, 99)], expected.slice(0, 3), `set ${trial}`);
        assert.equal(summary.count, n);
    }
    assert.deepEqual(summarize([]), {count: 0, mean: null, p50: null, p90: null, p99: null, max: null});
    assert.deepEqual(summarize([1, 2, 3, 4]), {count: 4, mean: 2.5, p50: 2.5, p90: 3.7, p99: 3.9699999999999998, max: 4});
});

test("percentile is numpy.percentile (p in 0..100), 0 without values as in vLLM's benchmark", () => {
    assert.equal(percentile([4, 1, 3, 2], 50), 2.5);
    assert.equal(percentile([4, 1, 3, 2], 99), 3.9699999999999998);
    assert.equal(percentile([4, 1, 3, 2], 0), 1);
    assert.equal(percentile([4, 1, 3, 2], 100), 4);
    assert.equal(percentile([7], 99), 7);
    assert.equal(percentile([], 50), 0);
    assert.equal(quantileOfSorted([], 0.5), null);
});
