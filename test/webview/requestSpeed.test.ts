/**
 * The request timeline's tooltip lines (webview/charts/requestSpeed.ts) on a real StatsManager's
 * request records with known timestamps: a request's own output tok/s, TTFT and mean ITL, worked out
 * here by hand from the fixture's times.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {requestSpeed, requestSpeedLines} from "../../webview/charts/requestSpeed.js";
import {fakeStats, T0} from "./statsFixtures.js";

describe("a request's own speed (the timeline tooltip)", () => {
    test("finished: 16 tokens from arrival to the finish's delivery 62 ms later, first tokens delivered at 32 ms, tokens 3 ms apart", () => {
        const stats = fakeStats();
        stats.runRequest("a");
        const record = stats.manager.snapshot().requests[0]!;
        // the fixture: arrival T0, tokens at T0+10, +13, … +55 (first ones delivered at T0+32), finish delivered at T0+62
        assert.deepEqual([record.arrival, record.firstToken, record.lastToken, record.firstDelivered, record.lastDelivered, record.generatedTokens],
            [T0, T0 + 10, T0 + 55, T0 + 32, T0 + 62, 16]);
        const speed = requestSpeed(record, T0 + 5000);
        assert.equal(speed.running, false);
        assert.ok(Math.abs(speed.outputTokensPerS! - 16 / 0.062) < 1e-9, `${speed.outputTokensPerS}`);
        assert.ok(Math.abs(speed.ttftS! - 0.032) < 1e-12);
        assert.ok(Math.abs(speed.meanItlS! - 0.003) < 1e-12);
        assert.deepEqual(requestSpeedLines(record, T0 + 5000), ["output 258 tok/s (16 tokens in 0.062 s)", "TTFT 32 ms", "ITL 3 ms (mean)"]);
    });

    test("running: the rate so far, up to now; before its first token no TTFT, with one token no ITL", () => {
        const stats = fakeStats();
        stats.runRequest("done");
        const record = stats.manager.snapshot().requests[0]!;
        const waiting = {...record, phase: "waiting" as const, generatedTokens: 0, firstToken: undefined, lastToken: undefined, firstDelivered: undefined,
            finished: undefined, lastDelivered: undefined, reason: undefined};
        assert.deepEqual(requestSpeedLines(waiting, T0 + 500), ["output 0 tok/s (0 tokens in 0.500 s, so far)", "TTFT –", "ITL – (mean)"]);
        const oneToken = {...waiting, phase: "running" as const, generatedTokens: 1, firstToken: T0 + 10, lastToken: T0 + 10, firstDelivered: T0 + 20};
        assert.deepEqual(requestSpeedLines(oneToken, T0 + 2000), ["output 0.500 tok/s (1 tokens in 2 s, so far)", "TTFT 20 ms", "ITL – (mean)"]);
    });
});
