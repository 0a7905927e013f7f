/**
 * StatsManager on a real engine: the "stalled" state when the engine's main thread blocks for 5 s
 * (reached within 1.5 s, left when steps resume), and the request ledger across an engine crash and
 * restart (arrived = completed + failed + aborted + in flight, at every event).
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {tinyModelPath} from "../helpers/testModels.js";

const prompt = "Once upon a time";

describe("StatsManager on a real engine", () => {
    test("a 5 s block of the engine's main thread shows as stalled within 1.5 s, and busy/idle after", async () => {
        const manager = new StatsManager({stallThresholdMs: 1000, tickIntervalMs: 100});
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, statsIntervalMs: 250, allowDebugRequests: true});
        const detach = client.observe(manager);
        try {
            await client.start();
            await client.generate({prompt, maxTokens: 4, ignoreEos: true}).done;
            const states: Array<{t: number, state: string}> = [];
            const poll = setInterval(() => states.push({t: Date.now(), state: manager.state}), 50);
            const blockStart = Date.now();
            const result = await client.generate({prompt, maxTokens: 8, ignoreEos: true, debugBlockMs: 5000}).done;
            await new Promise((resolve) => setTimeout(resolve, 600));
            clearInterval(poll);
            assert.equal(result.generatedTokens, 8);
            const firstStalled = states.find((s) => s.state === "stalled");
            assert.ok(firstStalled !== undefined, `never stalled: ${[...new Set(states.map((s) => s.state))].join(",")}`);
            assert.ok(firstStalled.t - blockStart <= 1500, `stalled after ${firstStalled.t - blockStart} ms`);
            const lastStalled = states.filter((s) => s.state === "stalled").at(-1)!;
            assert.ok(lastStalled.t - blockStart >= 4500, "stalled during the whole block");
            assert.notEqual(states.at(-1)!.state, "stalled", "left stalled once steps resumed");
            assert.ok(manager.snapshot().gauges.msSinceLastStep < 1000);
        } finally {
            detach();
            await client.stop();
            await manager.dispose();
        }
    });

    test("the ledger balances at every event across a SIGKILL and a restart", async () => {
        const manager = new StatsManager({tickIntervalMs: 0});
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, parallel: 2, statsIntervalMs: 0});
        const detach = client.observe(manager);
        const violations: string[] = [];
        const check = () => {
            const r = manager.snapshot().counters.requests;
            if (r.arrived !== r.completed + r.failed + r.aborted + r.inFlight)
                violations.push(JSON.stringify(r));
        };
        client.observe({onOutputs: check});
        try {
            await client.start();
            await Promise.all([1, 2, 3].map(() => client.generate({prompt, maxTokens: 5, ignoreEos: true}).done));
            const doomed = [1, 2, 3, 4].map(() => client.generate({prompt, maxTokens: 3000, ignoreEos: true}));
            await new Promise<void>((resolve) => doomed[0]!.onChunk(() => resolve()));
            const aborted = client.generate({prompt, maxTokens: 3000, ignoreEos: true});
            aborted.cancel();
            await aborted.done;
            process.kill(client.info!.pid, "SIGKILL");
            await Promise.all(doomed.map((h) => h.done));
            check();
            await client.restart();
            await Promise.all([1, 2].map(() => client.generate({prompt, maxTokens: 5, ignoreEos: true}).done));
            check();
            const requests = manager.snapshot().counters.requests;
            assert.deepEqual(violations, []);
            assert.equal(requests.arrived, 10);
            assert.equal(requests.completed, 5);
            assert.equal(requests.failed, 4, "the requests in flight at the crash failed");
            assert.equal(requests.aborted, 1);
            assert.equal(requests.inFlight, 0);
        } finally {
            detach();
            await client.stop();
            await manager.dispose();
        }
    });
});
