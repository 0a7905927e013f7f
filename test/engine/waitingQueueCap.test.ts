/**
 * The engine's waiting queue is capped (EngineOptions.maxWaitingRequests): a request that arrives when
 * the cap is reached and no sequence is free is refused at once with `queue_full` and a message naming
 * the cap; requests under it are served. The option is validated and survives the trip to an engine
 * process. Real engine (in this process), the generated tiny model, one sequence.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {checkEngineOptions, defaultEngineOptions} from "../../protocol/engineOptions.js";
import {parseEngineOptionsJson, serializeEngineOptions} from "../../protocol/engineOptionsTransfer.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";
import {tinyModelPath} from "../helpers/testModels.js";

const long = {prompt: "Once upon a time", maxTokens: 400, ignoreEos: true, temperature: 0};
const short = {prompt: "Hello", maxTokens: 2, ignoreEos: true, temperature: 0};

describe("waiting queue cap", () => {
    let engine: EngineUnderTest;

    before(async () => {
        engine = await EngineUnderTest.start({parallel: 1, maxWaitingRequests: 2, prefixCache: false});
    });
    after(async () => {
        await engine.engine.dispose();
    });

    test("at the cap a request is refused with queue_full naming the cap; under it requests are served", async () => {
        const running = engine.send(long); // takes the only sequence
        const waiting = [engine.send(short), engine.send(short)]; // the queue is now at its cap of 2
        const refused = await engine.send(short).done;
        assert.equal(refused.finished.reason, "error");
        assert.equal(refused.finished.errorCode, "queue_full");
        assert.equal(refused.finished.error,
            "the engine's waiting queue is full: 2 requests are waiting, at most 2 may (maxWaitingRequests); retry shortly");
        assert.equal(refused.finished.promptTokens, 0, "refused before its prompt was even tokenized");
        assert.equal(engine.events.filter((event) => event.kind === "queued").length, 3, "the refused request never queued");

        // The running one leaves: one waiting request starts, so there is room for one more.
        engine.engine.handle({type: "cancel", id: running.id});
        assert.equal((await running.done).finished.reason, "abort");
        const later = engine.send(short);
        for (const outcome of await Promise.all([...waiting, later].map((request) => request.done)))
            assert.equal(outcome.finished.reason, "length", outcome.finished.error);
    });
});

describe("waiting queue cap 0: never wait", () => {
    test("with every sequence busy a request is refused; with one free it is served", async () => {
        const engine = await EngineUnderTest.start({parallel: 1, maxWaitingRequests: 0});
        try {
            const running = engine.send(long);
            const refused = await engine.send(short).done;
            assert.equal(refused.finished.errorCode, "queue_full");
            assert.match(refused.finished.error ?? "", /0 requests are waiting, at most 0 may/);
            engine.engine.handle({type: "cancel", id: running.id});
            await running.done;
            assert.equal((await engine.generate(short)).finished.reason, "length");
        } finally {
            await engine.engine.dispose();
        }
    });
});

describe("maxWaitingRequests option", () => {
    test("validated, defaulted, and carried to an engine process", async () => {
        assert.equal(defaultEngineOptions.maxWaitingRequests, 1024);
        for (const bad of [-1, 1.5, Number.NaN, 2 ** 21])
            assert.throws(() => checkEngineOptions({statsIntervalMs: 0, maxWaitingRequests: bad}), /maxWaitingRequests must be an integer between 0 and 1048576/);
        checkEngineOptions({statsIntervalMs: 0, maxWaitingRequests: 0});
        assert.equal(parseEngineOptionsJson(serializeEngineOptions({maxWaitingRequests: 7})).maxWaitingRequests, 7);
        assert.throws(() => parseEngineOptionsJson(JSON.stringify({maxWaitingRequests: "7"})), /maxWaitingRequests/);

        // The same refusal through EngineClient and a real engine process (the option crosses the process boundary).
        const client = new EngineClient({mode: "process", modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 1,
            statsIntervalMs: 0, maxWaitingRequests: 1});
        await client.start();
        try {
            const running = client.generate(long);
            const waiting = client.generate(short);
            const refused = await client.generate(short).done;
            assert.equal(refused.reason, "error");
            assert.equal(refused.errorCode, "queue_full");
            assert.match(refused.error ?? "", /at most 1 may \(maxWaitingRequests\)/);
            running.cancel();
            assert.equal((await waiting.done).reason, "length");
        } finally {
            await client.stop();
        }
    });
});
