/**
 * The engine's own waiting-queue cap (EngineOptions.maxWaitingRequests, `serve --max-waiting`) seen
 * through the OpenAI-compatible endpoint: the engine's `queue_full` refusal becomes the same 503 with
 * `Retry-After` and an OpenAI-style error body as the server's own `maxWaiting` check, streamed or not,
 * with the official `openai` client and with fetch. Real engine process, the generated tiny model.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import {tinyModelPath} from "../helpers/testModels.js";

describe("engine queue full → 503", () => {
    let client: EngineClient;
    let server: ApiServer;
    let openai: OpenAI;

    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 1, statsIntervalMs: 0,
            maxWaitingRequests: 1});
        await client.start();
        // The server's own check would allow far more: only the engine's cap refuses here.
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, maxWaiting: 1000});
        openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
    });
    after(async () => {
        await server.close();
        await client.stop();
    });

    test("503 queue_full with Retry-After and the engine's message; requests under the cap are served", async () => {
        const controller = new AbortController();
        // One request on the only sequence, one waiting for it: the engine's queue is at its cap of 1.
        const running = openai.completions.create({model: "m", prompt: "Long story", max_tokens: 400, stream: true, ignore_eos: true} as
            OpenAI.CompletionCreateParamsStreaming, {signal: controller.signal}).then(async (stream) => {
            for await (const _ of stream) {/* drain */}
        }).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 200));
        const waiting = openai.completions.create({model: "m", prompt: "Short", max_tokens: 2});
        const deadline = Date.now() + 10_000;
        while (client.waitingCount < 1 && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 5));

        for (const stream of [false, true]) {
            const response = await fetch(`${server.baseUrl}/completions`, {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({model: "m", prompt: "one more", max_tokens: 2, stream})});
            const text = await response.text();
            assert.equal(response.status, 503, text);
            assert.equal(response.headers.get("retry-after"), "1");
            assert.match(response.headers.get("content-type") ?? "", /application\/json/);
            const body = JSON.parse(text) as {error: {message: string, type: string, param: string | null, code: string | null}};
            assert.deepEqual(body, {error: {
                message: "the engine's waiting queue is full: 1 requests are waiting, at most 1 may (maxWaitingRequests); retry shortly",
                type: "server_error", param: null, code: "queue_full"
            }});
        }
        await assert.rejects(openai.chat.completions.create({model: "m", messages: [{role: "user", content: "hi"}], max_tokens: 2}), (error: unknown) => {
            assert.ok(error instanceof OpenAI.APIError, String(error));
            assert.equal(error.status, 503);
            assert.equal(error.code, "queue_full");
            assert.equal((error.headers as Headers | undefined)?.get("retry-after"), "1");
            assert.match(error.message, /at most 1 may \(maxWaitingRequests\)/);
            return true;
        });

        controller.abort();
        await running;
        const served = await waiting;
        assert.equal(served.usage?.completion_tokens, 2, "the request under the cap was served");
    });
});

describe("serve --max-waiting 0: never wait, but serve whatever a free sequence can take", () => {
    let client: EngineClient;
    let server: ApiServer;

    before(async () => {
        // What `serve --max-waiting 0` configures: the same cap on the server and on the engine.
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 1, statsIntervalMs: 0,
            maxWaitingRequests: 0});
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, maxWaiting: 0});
    });
    after(async () => {
        await server.close();
        await client.stop();
    });

    const complete = (stream: boolean): Promise<Response> => fetch(`${server.baseUrl}/completions`, {method: "POST",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify({model: "m", prompt: "Hello", max_tokens: 2, stream})});

    test("an idle server answers 200 (the server's own check used to refuse every request: 0 waiting ≥ 0)", async () => {
        for (const stream of [false, true]) {
            const response = await complete(stream);
            assert.equal(response.status, 200, await response.text());
        }
    });

    test("with the only sequence busy, the next request gets 503 queue_full at once instead of waiting", async () => {
        const controller = new AbortController();
        const running = fetch(`${server.baseUrl}/completions`, {method: "POST", headers: {"Content-Type": "application/json"}, signal: controller.signal,
            body: JSON.stringify({model: "m", prompt: "Long story", max_tokens: 400, stream: true, ignore_eos: true})})
            .then(async (response) => await response.text()).catch(() => "");
        // Busy once the engine has scheduled it: until then the host counts it as waiting.
        const deadline = Date.now() + 10_000;
        while ((client.inFlightCount < 1 || client.waitingCount > 0) && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 5));
        const refused = await complete(false);
        const text = await refused.text();
        assert.equal(refused.status, 503, text);
        assert.equal(refused.headers.get("retry-after"), "1");
        assert.match(text, /"code":"queue_full"/);
        assert.equal(client.waitingCount, 0);
        controller.abort();
        await running;
    });
});
