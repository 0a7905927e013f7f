/**
 * QuietMoments on real timers, and StatsManager's ticks and /metrics renders through it: periodic stats
 * work runs right after a step's delivery while the engine steps, at once while it is idle.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {setImmediate as nextImmediate, setTimeout as sleep} from "node:timers/promises";
import {MessageChannel} from "node:worker_threads";
import {QuietMoments} from "../../extension/host/stats/quietMoments.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {StatsPipeline} from "../../extension/host/stats/statsPipeline.js";
import {engineInfo} from "../helpers/engineInfoFixture.js";
import {StepFeeder} from "../helpers/stepFeeder.js";

describe("QuietMoments", () => {
    test("an idle engine: work runs at once", () => {
        const quiet = new QuietMoments();
        let ran = 0;
        quiet.run(() => ran++);
        assert.equal(ran, 1);
    });

    test("a stepping engine: work waits for the next step and runs once that step's turn is done", async () => {
        const quiet = new QuietMoments({maxWaitMs: 10_000});
        quiet.onStep();
        let ran = 0;
        quiet.run(() => ran++);
        quiet.run(() => ran++);
        assert.equal(ran, 0, "ran while a step was recent");
        await nextImmediate();
        assert.equal(ran, 0, "ran without a new step");
        quiet.onStep();
        assert.equal(ran, 0, "ran inside the step's turn (its delivery)");
        await nextImmediate();
        assert.equal(ran, 2);
        assert.equal(quiet.pendingCount, 0);
    });

    test("no next step within maxWaitMs: work runs then", async () => {
        const quiet = new QuietMoments({maxWaitMs: 30});
        quiet.onStep();
        const asked = performance.now();
        await quiet.next();
        const waited = performance.now() - asked;
        assert.ok(waited >= 25, `waited ${waited.toFixed(1)} ms`);
    });

    test("the engine idle for maxWaitMs counts as idle again", async () => {
        const quiet = new QuietMoments({maxWaitMs: 20});
        quiet.onStep();
        await sleep(30);
        let ran = 0;
        quiet.run(() => ran++);
        assert.equal(ran, 1);
    });

    test("flush runs what is pending; a throwing work goes to onError and the rest still run", () => {
        const errors: unknown[] = [];
        const quiet = new QuietMoments({maxWaitMs: 10_000, onError: (error) => errors.push(error)});
        quiet.onStep();
        let ran = 0;
        quiet.run(() => {
            throw new Error("boom");
        });
        quiet.run(() => ran++);
        quiet.flush();
        assert.equal(ran, 1);
        assert.deepEqual(errors.map((error) => (error as Error).message), ["boom"]);
    });
});

/**
 * Steps arrive as an engine's do, from I/O (a MessagePort, in the poll phase) every 2 ms; `inStepTurn` is
 * true from a step's delivery until the check phase right after it. Returns a stop function.
 */
function stepEvery2Ms(manager: StatsManager, onStep: () => void): () => void {
    const feeder = new StepFeeder(manager);
    const {port1, port2} = new MessageChannel();
    port2.on("message", () => {
        feeder.step({t: Date.now(), running: 1, waiting: 0, stepTokens: 1, kvUsedTokens: 1, kvCapacityTokens: 16});
        onStep();
    });
    const timer = setInterval(() => port1.postMessage(0), 2);
    return () => {
        clearInterval(timer);
        port1.close();
        port2.close();
    };
}

describe("StatsManager's periodic work while the engine steps", () => {
    test("deltas go out right after a step's delivery, not between steps", async () => {
        const manager = new StatsManager({tickIntervalMs: 15});
        manager.onEngineReady(engineInfo());
        let inStepTurn = false;
        const stop = stepEvery2Ms(manager, () => {
            inStepTurn = true;
            // Queued after the manager's own immediate (onOutputs ran first): closes the window after it.
            setImmediate(() => inStepTurn = false);
        });
        const seen = {inTurn: 0, between: 0};
        const unsubscribe = manager.subscribe(() => inStepTurn ? seen.inTurn++ : seen.between++, {maxHz: 1000});
        try {
            await sleep(400);
        } finally {
            stop();
            unsubscribe();
            await manager.dispose();
        }
        assert.ok(seen.inTurn >= 5, `deltas right after a step: ${JSON.stringify(seen)}`);
        // A pause of the machine over 50 ms lets one tick run as if idle; more than two means no alignment.
        assert.ok(seen.between <= 2, `deltas between steps: ${JSON.stringify(seen)}`);
    });

    test("a /metrics render waits for the moment after a step, and is immediate while idle", async () => {
        const pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 0});
        const render = await pipeline.mountMetrics({modelName: "m"});
        try {
            const idleStart = performance.now();
            assert.match((await render()).body, /vllm:num_requests_running/);
            assert.ok(performance.now() - idleStart < 40, "an idle engine's render waited");

            let inStepTurn = false;
            const stop = stepEvery2Ms(pipeline.manager, () => {
                inStepTurn = true;
                setImmediate(() => inStepTurn = false);
            });
            try {
                await sleep(10);
                let renderedInTurn = 0;
                for (let i = 0; i < 10; i++) {
                    // The render's promise settles in the microtasks of the moment it ran.
                    if (await render().then(() => inStepTurn))
                        renderedInTurn++;
                    await sleep(3);
                }
                assert.ok(renderedInTurn >= 8, `renders right after a step: ${renderedInTurn} of 10`);
            } finally {
                stop();
            }
        } finally {
            await pipeline.dispose();
        }
    });
});
