/** Exact percentiles by quickselect equal numpy's linear method computed from a full sort. */
import assert from "node:assert/strict";
import {test} from "node:test";
import {Xoshiro128, nextUnit} from "../../common/seededRandom.js";
import {summarize} from "../../extension/host/stats/percentiles.js";

function byFullSort(values: number[]): [number, number, number, number] {
    const sorted = [...values].sort((a, b) => a - b);
    const q = (p: number) => {
        const index = p * (sorted.length - 1);
        const lo = Math.floor(index);
        const hi = Math.ceil(index);
        return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (index - lo);
    };
    return [q(0.5), q(0.9), q(0.99), sorted.at(-1)!];
}

test("summarize matches a full sort on 3000 seeded random sets, with ties", () => {
    const rng = new Xoshiro128(7);
    for (let trial = 0; trial < 3000; trial++) {
        const n = 1 + (rng.nextUint32() % 400);
        const values = Array.from({length: n}, () => nextUnit(rng) < 0.3 ? rng.nextUint32() % 5 : nextUnit(rng) * 100);
        const summary = summarize(values);
        assert.deepEqual([summary.p50, summary.p90, summary.p99, summary.max], byFullSort(values), `set ${trial}`);
        assert.equal(summary.count, n);
    }
    assert.deepEqual(summarize([]), {count: 0, mean: null, p50: null, p90: null, p99: null, max: null});
    assert.deepEqual(summarize([1, 2, 3, 4]), {count: 4, mean: 2.5, p50: 2.5, p90: 3.7, p99: 3.9699999999999998, max: 4});
});
