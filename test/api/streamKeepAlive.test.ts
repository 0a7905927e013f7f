/**
 * Streams stay alive while silent: after the server's ping interval without a write (a request waiting, the engine busy),
 * an SSE comment line (`:`), as llama-server sends every 30 s by default; a request's llama.cpp field `sse_ping_interval`
 * overrides the server's (−1: none). SSE parsers skip the comments: the official `openai` client reads the same text.
 * Real engine (the tiny model); the silence: a request queued while two long ones hold both sequences.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import {tinyModelPath} from "../helpers/testModels.js";

const pingIntervalS = 0.05;
/** Tokens of the requests that hold both sequences: ~1 s of the tiny model at two sequences (~3.5 ms a step). */
const holdTokens = 300;

describe("SSE keep-alive pings while a stream is silent", () => {
    let client: EngineClient;
    let server: ApiServer;
    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 2, statsIntervalMs: 0});
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, ssePingIntervalS: pingIntervalS});
    });
    after(async () => {
        await server.close();
        await client.stop();
    });

    /** Starts a stream while both sequences are busy for ~1 s: it is queued (its status line sent), then waits silent. */
    async function silenceDuring<T>(start: () => Promise<T>): Promise<T> {
        const holders = [0, 1].map(() => client.generate({prompt: "Once", maxTokens: holdTokens, ignoreEos: true}));
        // Both run once each has its first token.
        await Promise.all(holders.map(async (holder) => await holder[Symbol.asyncIterator]().next()));
        const started = await start();
        await Promise.all(holders.map((holder) => holder.done));
        return started;
    }
    async function rawStream(path: string, body: object): Promise<string> {
        const response = await silenceDuring(async () => await fetch(`${server.baseUrl.replace(/\/v1$/, "")}${path}`, {method: "POST",
            headers: {"content-type": "application/json"}, body: JSON.stringify({stream: true, temperature: 0, ...body})}));
        assert.equal(response.status, 200);
        return await response.text();
    }

    test("a silent stream gets comment lines, on each streaming endpoint; its events are intact", async () => {
        const endpoints = [
            {path: "/v1/chat/completions", body: {messages: [{role: "user", content: "Hello"}], max_tokens: 8}},
            {path: "/v1/completions", body: {prompt: "Once upon a time", max_tokens: 8}},
            {path: "/completion", body: {prompt: "Once upon a time", n_predict: 8}},
            {path: "/v1/messages", body: {model: "m", messages: [{role: "user", content: "Hello"}], max_tokens: 8}},
            {path: "/v1/responses", body: {input: "Hello", max_output_tokens: 8}}
        ];
        for (const {path, body} of endpoints) {
            const text = await rawStream(path, body);
            const blocks = text.split("\n\n").filter((block) => block !== "");
            const pings = blocks.filter((block) => block === ":");
            assert.ok(pings.length >= 3, `${path}: ${pings.length} pings while waiting for a sequence, at ${pingIntervalS} s`);
            for (const block of blocks.filter((b) => b !== ":")) {
                const data = block.split("\n").find((line) => line.startsWith("data: "))!.slice("data: ".length);
                if (data !== "[DONE]")
                    assert.doesNotThrow(() => JSON.parse(data), `${path}: ${block}`);
            }
        }
    });

    test("a request's sse_ping_interval overrides the server's: -1, none", async () => {
        const text = await rawStream("/v1/completions", {prompt: "Once upon a time", max_tokens: 8, sse_ping_interval: -1});
        assert.ok(!text.split("\n\n").includes(":"), text);
        const refused = await fetch(`${server.baseUrl}/completions`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({prompt: "x", stream: true, sse_ping_interval: "soon"})});
        assert.equal(refused.status, 400);
        assert.equal((await refused.json() as {error: {param: string}}).error.param, "sse_ping_interval");
    });

    test("the official openai client reads a pinged stream to the same text as a whole answer", async () => {
        const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
        const request = {model: "m", messages: [{role: "user" as const, content: "Hello"}], max_tokens: 12, temperature: 0};
        const whole = await openai.chat.completions.create(request);
        const chunks = await silenceDuring(async () => await openai.chat.completions.create({...request, stream: true}));
        let text = "";
        for await (const chunk of chunks)
            text += chunk.choices[0]?.delta.content ?? "";
        assert.equal(text, whole.choices[0]!.message.content);
    });
});
