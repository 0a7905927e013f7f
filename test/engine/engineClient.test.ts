/**
 * The engine through EngineClient, in both architectures, on a real generated model with real
 * node-llama-cpp: generation, concurrency, cancellation, priority preemption, bad input, and the
 * stats channel's heartbeat while the engine's main thread is blocked.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import {after, before, describe, test} from "node:test";
import WebSocket from "ws";
import {statsSecretHeader} from "../../protocol/statsChannel.js";
import {engineThreadpoolSize} from "../../extension/host/engineClient/childProcessTransport.js";
import {engineExecArgv} from "../../extension/host/engineClient/engineExecArgv.js";
import {EngineClient, type EngineClientOptions, type EngineMode} from "../../extension/host/engineClient/engineClient.js";
import type {EngineStep} from "../../extension/host/engineClient/engineStep.js";
import type {RequestResult} from "../../extension/host/engineClient/requestState.js";
import type {ReceivedSnapshot} from "../../extension/host/engineClient/statsChannelServer.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {tinyModelPath} from "../helpers/testModels.js";
import {expectedBackend} from "../helpers/expectedBackend.js";

const prompt = "Once upon a time there was a little robot";

async function startClient(options: EngineClientOptions): Promise<EngineClient> {
    const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, ...options});
    await client.start();
    return client;
}

function assertOrdered(result: RequestResult): void {
    const t = result;
    const chain = [t.arrival, t.inputProcessed, t.queued, t.scheduled, t.firstToken, t.lastToken, t.finished];
    for (let i = 1; i < chain.length; i++) {
        assert.ok(chain[i] !== undefined, `timing ${i} missing`);
        // engine timestamps are corrected by a measured offset: allow 1 ms of measurement error
        assert.ok(chain[i]! >= chain[i - 1]! - 1, `timings out of order at ${i}: ${JSON.stringify(t)}`);
    }
    assert.ok(t.firstDelivered! >= t.arrival);
    assert.ok(t.lastDelivered >= t.firstDelivered!);
}

for (const mode of ["process", "inProcess"] as EngineMode[]) {
    describe(`engine (${mode})`, () => {
        let client: EngineClient;
        const steps: EngineStep[] = [];
        const manager = new StatsManager({tickIntervalMs: 0});

        before(async () => {
            client = await startClient({mode, parallel: 4, statsIntervalMs: 200});
            client.observe({onOutputs: (step) => steps.push(step)});
            client.observe(manager);
        });
        after(async () => {
            await client.stop();
        });

        test("reports the backend node-llama-cpp picks here (CPU or a GPU), model metadata and its settings", () => {
            const info = client.info!;
            assert.equal(info.backend, expectedBackend());
            assert.equal(info.gpuDevices.length === 0, info.backend === "cpu");
            assert.equal(info.model.architecture, "llama");
            assert.ok(info.model.parameterCount > 500_000 && info.model.parameterCount < 2_000_000, String(info.model.parameterCount));
            assert.equal(info.parallel, 4);
            assert.equal(info.contextSize, 1024);
            assert.equal(info.threads, 1);
            assert.equal(info.pid === process.pid, mode === "inProcess");
        });

        if (mode === "process") {
            test("the engine process runs with one libuv thread unless the environment says otherwise", async () => {
                const threadpoolOf = (pid: number) => fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0")
                    .find((entry) => entry.startsWith("UV_THREADPOOL_SIZE="));
                assert.equal(threadpoolOf(client.info!.pid), `UV_THREADPOOL_SIZE=${engineThreadpoolSize}`);
                const inherited = process.env.UV_THREADPOOL_SIZE;
                process.env.UV_THREADPOOL_SIZE = "3";
                try {
                    const other = await startClient({mode, parallel: 1, statsIntervalMs: 0});
                    try {
                        assert.equal(threadpoolOf(other.info!.pid), "UV_THREADPOOL_SIZE=3");
                    } finally {
                        await other.stop();
                    }
                } finally {
                    if (inherited === undefined) delete process.env.UV_THREADPOOL_SIZE;
                    else process.env.UV_THREADPOOL_SIZE = inherited;
                }
            });

            test("the engine process runs without V8's optimizing compilers when llama.cpp's threads leave no core for them", () => {
                assert.deepEqual(engineExecArgv(undefined, 2), ["--no-turbofan", "--no-maglev"]);
                assert.deepEqual(engineExecArgv(2, 4), ["--no-turbofan", "--no-maglev"]);
                assert.deepEqual(engineExecArgv(undefined, 8), []);
                assert.deepEqual(engineExecArgv(4, 16), []);
                const argv = fs.readFileSync(`/proc/${client.info!.pid}/cmdline`, "latin1").split("\0");
                const flagged = os.availableParallelism() < client.info!.threads + 3;
                assert.equal(argv.includes("--no-turbofan") && argv.includes("--no-maglev"), flagged, argv.join(" "));
            });
        }

        test("counts tokens with the model's own tokenizer: a prompt's count and BOS are the prompt tokens its request reports", async () => {
            const result = await client.generate({prompt, maxTokens: 2, ignoreEos: true}).done;
            // The prompt's tokens and the BOS this vocabulary begins a text with.
            assert.equal(await client.countTokens(prompt) + 1, result.promptTokens);
            assert.ok(result.promptTokens > 3);
            assert.equal(await client.countTokens(""), 0);
            const counts = await Promise.all(["a", "a a a a", `${prompt} ${prompt}`].map((text) => client.countTokens(text)));
            assert.ok(counts[0]! < counts[1]! && counts[2]! >= 2 * (result.promptTokens - 1) - 1, counts.join(", "));
        });

        test("generates exactly maxTokens with ignoreEos and reports the whole lifecycle", async () => {
            const handle = client.generate({prompt, maxTokens: 24, ignoreEos: true, seed: 7});
            let streamed = "";
            let chunks = 0;
            for await (const chunk of handle) {
                streamed += chunk.text;
                chunks++;
            }
            const result = await handle.done;
            assert.equal(result.reason, "length");
            assert.equal(result.generatedTokens, 24);
            assert.equal(result.tokenTimes.length, 24);
            assert.equal(result.text, streamed);
            assert.ok(chunks >= 1);
            assert.ok(result.promptTokens > 3);
            assertOrdered(result);
            const mine = steps.filter((step) => step.iteration.updated.some((r) => r.id === handle.id));
            assert.deepEqual(mine[0]!.iteration.arrived.map((r) => r.id), [handle.id], "the first step announces the arrival");
            assert.equal(mine[0]!.scheduler, undefined, "an arrival is a host-side step");
            assert.ok(mine.slice(1).every((step) => step.scheduler !== undefined), "the rest are engine steps with scheduler stats");
            assert.equal(steps.filter((step) => step.iteration.finished.some((r) => r.id === handle.id)).length, 1, "finished once");
            assert.equal(mine.at(-1)!.iteration.finished[0], mine[0]!.iteration.arrived[0], "one lifecycle object from arrival to finish");
        });

        test("8 concurrent requests on 4 sequences all complete with their exact token counts", async () => {
            const lengths = [5, 9, 13, 17, 21, 25, 29, 33];
            const running: number[] = [];
            const unobserve = client.observe({onOutputs: (step) => {
                if (step.scheduler !== undefined)
                    running.push(step.scheduler.running);
            }});
            const results = await Promise.all(lengths.map((maxTokens, i) =>
                client.generate({prompt: `${prompt} number ${i}`, maxTokens, ignoreEos: true}).done));
            unobserve();
            assert.deepEqual(results.map((r) => r.generatedTokens), lengths);
            assert.ok(results.every((r) => r.reason === "length"));
            assert.ok(Math.max(...running) === 4, `at most 4 run at once and 4 did (saw ${Math.max(...running)})`);
        });

        test("cancel while queued and while running", async () => {
            const blockers = [0, 1, 2, 3].map(() => client.generate({prompt, maxTokens: 400, ignoreEos: true}));
            const queued = client.generate({prompt, maxTokens: 10, ignoreEos: true});
            await new Promise<void>((resolve) => blockers[0]!.onChunk(() => resolve()));
            queued.cancel();
            const queuedResult = await queued.done;
            assert.equal(queuedResult.reason, "abort");
            assert.equal(queuedResult.generatedTokens, 0);
            assert.equal(queuedResult.scheduled, undefined, "never scheduled");
            for (const blocker of blockers)
                blocker.cancel();
            const blockerResults = await Promise.all(blockers.map((b) => b.done));
            for (const result of blockerResults) {
                assert.equal(result.reason, "abort");
                assert.ok(result.generatedTokens < 400);
            }
        });

        test("prompt longer than the context, maxTokens < 0: the request ends with a typed error", async () => {
            const long = await client.generate({prompt: "word ".repeat(3000), maxTokens: 8}).done;
            assert.equal(long.reason, "error");
            assert.match(long.error!, /context holds 1024 tokens/);
            const negative = await client.generate({prompt, maxTokens: -1}).done;
            assert.equal(negative.reason, "error");
            assert.match(negative.error!, /maxTokens must be ≥ 0/);
            const ok = await client.generate({prompt, maxTokens: 3, ignoreEos: true}).done;
            assert.equal(ok.generatedTokens, 3, "the engine still serves");
        });

        test("chat messages are rendered and served", async () => {
            const result = await client.generate({messages: [{role: "system", content: "Be brief."}, {role: "user", content: "Hi!"}], maxTokens: 6, ignoreEos: true}).done;
            assert.equal(result.reason, "length");
            assert.equal(result.generatedTokens, 6);
        });

        test("the ledger accounts for every request", () => {
            const ledger = manager.counters().requests;
            const ended = Object.values(ledger.byReason).reduce((a, b) => a + b, 0);
            assert.equal(ledger.arrived, 19, "1 + 1 + 8 + 5 + 3 + 1 requests sent by the tests above");
            assert.deepEqual(ledger.byReason, {stop: 0, length: 12, abort: 5, error: 2});
            assert.equal(ledger.arrived, ended + ledger.inFlight);
            assert.equal(ledger.inFlight, 0);
            assert.equal(client.inFlightCount, 0);
        });
    });

    describe(`priority preemption (${mode})`, () => {
        let client: EngineClient;
        before(async () => {
            client = await startClient({mode, parallel: 1, statsIntervalMs: 0});
        });
        after(async () => {
            await client.stop();
        });

        test("a higher-priority request preempts the running one, which still completes with all its tokens", async () => {
            const steps: EngineStep[] = [];
            const lowPhases: string[] = [];
            client.observe({onOutputs: (step) => {
                steps.push(step);
                const lifecycle = step.iteration.updated.find((r) => r.id === "low");
                if (lifecycle !== undefined && lifecycle.phase !== lowPhases.at(-1))
                    lowPhases.push(lifecycle.phase);
            }});
            const low = client.generate({id: "low", prompt, maxTokens: 300, ignoreEos: true, priority: 0});
            await new Promise<void>((resolve) => low.onChunk(() => resolve()));
            const high = client.generate({prompt: "High priority", maxTokens: 10, ignoreEos: true, priority: 5});
            const [lowResult, highResult] = await Promise.all([low.done, high.done]);
            assert.equal(highResult.generatedTokens, 10);
            assert.equal(lowResult.reason, "length");
            assert.equal(lowResult.generatedTokens, 300, "recomputed after preemption and completed");
            assert.equal(lowResult.tokenTimes.length, 300);
            assert.ok(lowResult.preemptions.length >= 1);
            assert.ok(steps.some((step) => step.iteration.preemptions > 0 && step.iteration.updated.some((r) => r.id === low.id)));
            assert.ok(highResult.finished < lowResult.finished, "high finished first");
            // Resumed: put on the sequence again (running, as the engine says so), on the one sequence there is.
            assert.deepEqual(lowPhases.slice(lowPhases.indexOf("preempted")), ["preempted", "running", "finished"]);
            assert.equal(lowResult.sequence, 0);
            assert.equal(highResult.sequence, 0);
        });

        test("a scored prompt is scored once: preempted while generating, it resumes without scoring again", async () => {
            const scoredAlone = await client.generate({prompt, maxTokens: 0, promptLogprobs: 1}).done;
            assert.equal(scoredAlone.reason, "length");
            assert.equal(scoredAlone.generatedTokens, 0);
            assert.equal(scoredAlone.promptLogprobs?.logprobs.length, scoredAlone.promptTokens - 1, "every token but the first");
            const low = client.generate({prompt, maxTokens: 200, ignoreEos: true, promptLogprobs: 1});
            await new Promise<void>((resolve) => low.onChunk(() => resolve()));
            assert.deepEqual(low.promptLogprobs, scoredAlone.promptLogprobs, "there before the first chunk");
            const high = client.generate({prompt: "High priority", maxTokens: 5, ignoreEos: true, priority: 5});
            const [lowResult] = await Promise.all([low.done, high.done]);
            assert.ok(lowResult.preemptions.length >= 1);
            assert.equal(lowResult.generatedTokens, 200);
            assert.deepEqual(lowResult.promptLogprobs, scoredAlone.promptLogprobs);
            // Nothing to generate and nothing to score: the prompt is evaluated into the prefix cache (llama.cpp's n_predict 0).
            const warmed = await client.generate({prompt: `${prompt} again`, maxTokens: 0}).done;
            assert.equal(warmed.reason, "length");
            assert.equal(warmed.generatedTokens, 0);
            assert.ok(warmed.metrics.prefillS !== undefined, "measured as prefill");
            const reused = await client.generate({prompt: `${prompt} again`, maxTokens: 1}).done;
            assert.equal(reused.cachedTokens, reused.promptTokens - 1, "all but the last token were left in the cache");
        });

        test("equal priority never preempts", async () => {
            const a = client.generate({prompt, maxTokens: 40, ignoreEos: true, priority: 1});
            await new Promise<void>((resolve) => a.onChunk(() => resolve()));
            const b = client.generate({prompt, maxTokens: 5, ignoreEos: true, priority: 1});
            const [ra, rb] = await Promise.all([a.done, b.done]);
            assert.equal(ra.preemptions.length, 0);
            assert.ok(rb.scheduled! >= ra.finished - 1, "b waited for a");
        });
    });

    describe(`stats channel (${mode})`, () => {
        let client: EngineClient;
        before(async () => {
            client = await startClient({mode, parallel: 2, statsIntervalMs: 1000, allowDebugRequests: true});
        });
        after(async () => {
            await client.stop();
        });

        test("snapshots keep coming while the engine's main thread is blocked for 5 s", async () => {
            const snapshots: ReceivedSnapshot[] = [];
            client.observe({onStatsSnapshot: (s) => snapshots.push(s)});
            const warm = await client.generate({prompt, maxTokens: 4, ignoreEos: true}).done;
            assert.equal(warm.generatedTokens, 4);
            const blockStart = Date.now();
            const blocked = client.generate({prompt, maxTokens: 4, ignoreEos: true, debugBlockMs: 5000});
            const result = await blocked.done;
            assert.equal(result.generatedTokens, 4, "the request completes after the block");
            // In-process, the host shares the blocked thread: the frames sent meanwhile are read right after.
            await new Promise((resolve) => setTimeout(resolve, 300));
            const during = snapshots.filter((s) => s.t > blockStart && s.t < blockStart + 5000 && s.running === 1);
            assert.ok(during.length >= 4, `at least 4 snapshots sent during the block, got ${during.length}`);
            const growing = during.map((s) => s.msSinceLastStep);
            assert.ok(growing.at(-1)! > growing[0]!, `time since last step grows: ${growing.join(", ")}`);
            assert.ok(growing.at(-1)! >= 3000, `reached ${growing.at(-1)} ms`);
            if (mode === "process") {
                // The host's own thread is free in process mode, so the snapshots arrive on time.
                const received = snapshots.filter((s) => s.receivedAt > blockStart && s.receivedAt < blockStart + 5000);
                assert.ok(received.length >= 4, `received ${received.length} during the block`);
            }
        });

        test("a stats client without the secret is refused; bad frames are counted, not fatal", async () => {
            const url = client.statsUrl!;
            const before = client.statsRejectedCount;
            for (const headers of [{}, {[statsSecretHeader]: "wrong"}]) {
                const status = await new Promise<number>((resolve) => {
                    const ws = new WebSocket(url, {headers});
                    ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
                    ws.on("open", () => resolve(101));
                    ws.on("error", () => undefined);
                });
                assert.equal(status, 401);
            }
            assert.equal(client.statsRejectedCount, before + 2);
        });
    });
}
