/**
 * An engine that crashes is restarted with a growing delay and, after a few crashes close together,
 * left stopped with one report of what failed — on the real engine process, killed from outside, and
 * on an engine that cannot start at all. Never a loop.
 */
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {after, describe, test} from "node:test";
import {CrashRestarter, type CrashRestartEvent} from "../../extension/host/engineClient/crashRestarter.js";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {tinyModelPath} from "../helpers/testModels.js";

const policy = {maxRestarts: 3, windowMs: 60_000, firstDelayMs: 50};

/** Resolves with the next event `events` receives that satisfies `match`. */
function nextEvent(events: CrashRestartEvent[], match: (event: CrashRestartEvent) => boolean, timeoutMs = 60_000): Promise<CrashRestartEvent> {
    const seen = events.length;
    return new Promise((resolve, reject) => {
        const deadline = Date.now() + timeoutMs;
        const poll = setInterval(() => {
            const found = events.slice(seen).find(match);
            if (found !== undefined || Date.now() > deadline) {
                clearInterval(poll);
                if (found !== undefined)
                    resolve(found);
                else
                    reject(new Error(`no matching event; saw ${JSON.stringify(events.slice(seen))}`));
            }
        }, 20);
    });
}

describe("crash restarts", () => {
    const clients: EngineClient[] = [];
    after(async () => {
        for (const client of clients)
            await client.stop();
    });

    test("a killed engine process comes back after a growing delay; the fourth crash in a row is reported, not restarted", async () => {
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 256, parallel: 1, statsIntervalMs: 0});
        clients.push(client);
        const events: CrashRestartEvent[] = [];
        let restarts = 0;
        const restarter = new CrashRestarter({policy, onEvent: (event) => events.push(event), restart: async () => {
            restarts++;
            await client.start();
        }});
        let lastExit = "";
        client.observe({
            onEngineExit: (exit) => lastExit = exit.description,
            onEngineState: (state) => {
                if (state === "crashed")
                    restarter.crashed(`engine exited (${lastExit})`);
            }
        });
        await client.start();

        for (let attempt = 1; attempt <= policy.maxRestarts; attempt++) {
            const pid = client.info!.pid;
            const restarted = nextEvent(events, (event) => event.kind === "restarted");
            process.kill(pid, "SIGKILL");
            assert.deepEqual(await restarted, {kind: "restarted", attempt});
            assert.equal(client.state, "ready");
            assert.notEqual(client.info!.pid, pid, "a new engine process");
            const served = await client.generate({prompt: "Once upon a time", maxTokens: 4, temperature: 0, ignoreEos: true}).done;
            assert.equal(served.reason, "length");
        }
        const delays = events.flatMap((event) => event.kind === "scheduled" ? [event.delayMs] : []);
        assert.deepEqual(delays, [50, 100, 200]);

        const gaveUp = nextEvent(events, (event) => event.kind === "gaveUp");
        process.kill(client.info!.pid, "SIGKILL");
        const report = await gaveUp;
        assert.equal(report.kind, "gaveUp");
        assert.equal(report.kind === "gaveUp" && report.crashes, 4);
        assert.match(report.kind === "gaveUp" ? report.crash : "", /SIGKILL/);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.equal(restarts, policy.maxRestarts, "no restart after giving up");
        assert.equal(client.state, "crashed");
        assert.equal(restarter.pending, false);
    });

    test("an engine that dies on start is tried maxRestarts times, then reported with the reason", async () => {
        const dir = await fs.mkdtemp(path.join(os.tmpdir(), "im-crash-restart-"));
        const broken = path.join(dir, "broken.gguf");
        await fs.writeFile(broken, "GGUF but not really a model");
        const events: CrashRestartEvent[] = [];
        let starts = 0;
        const restarter = new CrashRestarter({policy, onEvent: (event) => events.push(event), restart: async () => {
            starts++;
            const client = new EngineClient({modelPath: broken, threads: 1, statsIntervalMs: 0});
            clients.push(client);
            await client.start();
        }});
        restarter.crashed("engine exited (signal SIGSEGV)");
        const report = await nextEvent(events, (event) => event.kind === "gaveUp");
        assert.equal(starts, policy.maxRestarts);
        assert.deepEqual(events.map((event) => event.kind), ["scheduled", "scheduled", "scheduled", "gaveUp"]);
        assert.match(report.kind === "gaveUp" ? report.crash : "", /the restart failed: .*broken\.gguf|the restart failed: .*(GGUF|model)/i);
        await fs.rm(dir, {recursive: true, force: true});
    });

    test("a deliberate stop cancels a scheduled restart and forgets the crashes", async () => {
        const events: CrashRestartEvent[] = [];
        let restarts = 0;
        const restarter = new CrashRestarter({policy: {...policy, firstDelayMs: 300}, onEvent: (event) => events.push(event), restart: () => {
            restarts++;
            return Promise.resolve();
        }});
        restarter.crashed("engine exited (signal SIGKILL)");
        assert.equal(restarter.pending, true);
        restarter.reset();
        assert.equal(restarter.pending, false);
        await new Promise((resolve) => setTimeout(resolve, 600));
        assert.equal(restarts, 0);
        restarter.crashed("engine exited (signal SIGKILL)");
        assert.deepEqual(events.filter((event) => event.kind === "scheduled").map((event) => event.kind === "scheduled" && event.attempt), [1, 1],
            "after a reset the next crash is a first one again");
        restarter.dispose();
    });
});
