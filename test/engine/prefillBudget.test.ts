/**
 * Chunked prefill's per-step budget (engine/prefillBudget.ts): the prefilling requests take from it in the waiting queue's
 * order, each what it needs of what those ahead left.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {PrefillBudget} from "../../engine/prefillBudget.js";

type Request = {name: string, priority: number, preempted: boolean, arrivalSeq: number};
let arrivals = 0;
const request = (name: string, priority = 0, preempted = false): Request => ({name, priority, preempted, arrivalSeq: arrivals++});

describe("PrefillBudget", () => {
    test("the first to arrive takes the whole budget; the next ones get what is left, or nothing", () => {
        const budget = new PrefillBudget<Request>(128);
        const [a, b, c] = [request("a"), request("b"), request("c")];
        budget.set(b, 1000);
        budget.set(a, 1000);
        budget.set(c, 1000);
        assert.deepEqual([a, b, c].map((r) => budget.shareOf(r)), [128, 0, 0], "served in arrival order, not in the order they entered");
        budget.set(a, 100);
        assert.deepEqual([a, b, c].map((r) => budget.shareOf(r)), [100, 28, 0], "a's rest fits; b gets what it leaves");
        budget.leave(a);
        assert.deepEqual([b, c].map((r) => budget.shareOf(r)), [128, 0]);
        assert.equal(budget.size, 2);
    });

    test("less than the smallest piece left is nothing, unless it is all a request still needs", () => {
        const budget = new PrefillBudget<Request>(128);
        const [a, b, c] = [request("a"), request("b"), request("c")];
        budget.set(a, 120);
        budget.set(b, 500);
        budget.set(c, 5);
        assert.deepEqual([a, b, c].map((r) => budget.shareOf(r)), [120, 0, 5], "8 left: no piece for b, but c's whole rest fits");
    });

    test("a higher priority, or a preempted request resuming, goes ahead of earlier arrivals", () => {
        const budget = new PrefillBudget<Request>(64);
        const early = request("early");
        const resumed = request("resumed", 0, true);
        const urgent = request("urgent", 5);
        for (const r of [early, resumed, urgent])
            budget.set(r, 200);
        assert.deepEqual([urgent, resumed, early].map((r) => budget.shareOf(r)), [64, 0, 0]);
        budget.leave(urgent);
        assert.deepEqual([resumed, early].map((r) => budget.shareOf(r)), [64, 0]);
    });

    test("a budget smaller than the smallest piece still lets the first one through", () => {
        const budget = new PrefillBudget<Request>(8);
        const [a, b] = [request("a"), request("b")];
        budget.set(a, 100);
        budget.set(b, 100);
        assert.deepEqual([a, b].map((r) => budget.shareOf(r)), [8, 0]);
    });

    test("a request without a place gets nothing; leaving twice is harmless", () => {
        const budget = new PrefillBudget<Request>(32);
        const [a, stranger] = [request("a"), request("stranger")];
        budget.set(a, 10);
        assert.equal(budget.shareOf(stranger), 0);
        budget.leave(a);
        budget.leave(a);
        assert.equal(budget.size, 0);
    });
});
