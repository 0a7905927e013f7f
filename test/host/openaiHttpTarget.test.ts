/**
 * The benchmark's HTTP client when a server closes kept-alive connections without `Connection: close`
 * (llama.cpp's server does so after every streamed response, and a pooled socket can be dead by the time
 * it is reused). The server here makes that race certain: it drops a connection as soon as a second
 * request arrives on it. Each such request must go out again on a new connection and succeed, counted
 * in `resentRequests`; a server that drops every connection fails the request with the socket's message
 * after a bounded number of tries.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type {AddressInfo, Socket} from "node:net";
import {after, describe, test} from "node:test";
import {maxSendAttempts, OpenAiHttpTarget} from "../../extension/host/bench/openaiHttpTarget.js";

const request = {prompt: "Once upon a time", maxTokens: 2, seed: 1, temperature: 0};

/** A streamed completion of two text chunks, a finish_reason and usage, then [DONE]. */
function streamCompletion(response: http.ServerResponse): void {
    response.writeHead(200, {"Content-Type": "text/event-stream"});
    const chunk = (body: object): string => `data: ${JSON.stringify(body)}\n\n`;
    response.write(chunk({choices: [{index: 0, text: " there", finish_reason: null}]}));
    response.write(chunk({choices: [{index: 0, text: " was", finish_reason: "length"}]}));
    response.write(chunk({choices: [], usage: {prompt_tokens: 4, completion_tokens: 2, total_tokens: 6}}));
    response.end("data: [DONE]\n\n");
}

/** A loopback server; `dropReused`: destroy a connection when a request arrives on it after the first; `dropAll`: every request. */
async function startServer(mode: "dropReused" | "dropAll"): Promise<{baseUrl: string, connections: () => number, close(): Promise<void>}> {
    const served = new WeakSet<Socket>();
    let connections = 0;
    const server = http.createServer((incoming, response) => {
        const socket = incoming.socket;
        if (mode === "dropAll" || served.has(socket)) {
            socket.destroy();
            return;
        }
        served.add(socket);
        incoming.resume();
        incoming.on("end", () => streamCompletion(response));
    });
    server.on("connection", () => connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const {port} = server.address() as AddressInfo;
    return {
        baseUrl: `http://127.0.0.1:${port}/v1`,
        connections: () => connections,
        close: () => new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
        })
    };
}

/** A server that sends one text chunk and then, per `mode`, holds the stream open or drops the connection. */
async function startStalledServer(mode: "hold" | "drop"): Promise<{baseUrl: string, closed: Promise<void>, close(): Promise<void>}> {
    let onClosed = (): void => undefined;
    const closed = new Promise<void>((resolve) => onClosed = resolve);
    const server = http.createServer((incoming, response) => {
        incoming.resume();
        incoming.on("end", () => {
            response.writeHead(200, {"Content-Type": "text/event-stream"});
            response.write(`data: ${JSON.stringify({choices: [{index: 0, text: " there", finish_reason: null}]})}\n\n`);
            response.on("close", onClosed);
            if (mode === "drop")
                setTimeout(() => incoming.socket.destroy(), 20);
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const {port} = server.address() as AddressInfo;
    return {
        baseUrl: `http://127.0.0.1:${port}/v1`,
        closed,
        close: () => new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
        })
    };
}

describe("OpenAiHttpTarget when a stream does not end normally", () => {
    test("cancel mid-stream: the request ends as abort and its connection is closed", async (t) => {
        const server = await startStalledServer("hold");
        t.after(() => server.close());
        const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions", modelName: "m"});
        const handle = target.send(request);
        setTimeout(() => handle.cancel(), 100);
        const result = await handle.done;
        assert.equal(result.reason, "abort");
        assert.equal(result.error, "cancelled");
        await server.closed; // the server saw the client go
        target.close();
    });

    test("a connection dropped mid-stream fails the request, saying the stream broke off", async (t) => {
        const server = await startStalledServer("drop");
        t.after(() => server.close());
        const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions", modelName: "m"});
        const result = await target.send(request).done;
        assert.equal(result.reason, "error");
        assert.match(result.error ?? "", /^the stream broke off: /);
        assert.equal(result.text, " there"); // what arrived before the drop is kept
        target.close();
    });
});

describe("OpenAiHttpTarget on connections the server closed", () => {
    const servers: Array<{close(): Promise<void>}> = [];
    after(async () => {
        await Promise.all(servers.map((server) => server.close()));
    });

    test("a request on a dead kept-alive connection goes out again on a new one and succeeds, counted", async () => {
        const server = await startServer("dropReused");
        servers.push(server);
        const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions", modelName: "m"});
        const sequential = 5;
        for (let i = 0; i < sequential; i++) {
            const result = await target.send(request).done;
            assert.equal(result.error, undefined);
            assert.equal(result.reason, "length");
            assert.equal(result.text, " there was");
            assert.equal(result.generatedTokens, 2);
        }
        // The client reuses kept-alive sockets, so some tries found theirs dropped (how many depends on the pool's
        // timing); each request then succeeded on a new connection, the only kind this server answers.
        assert.ok(target.resentRequests >= 1, String(target.resentRequests));
        assert.equal(server.connections(), sequential);
    });

    test("concurrent requests whose pooled sockets are all dead still succeed", async () => {
        const server = await startServer("dropReused");
        servers.push(server);
        const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions", modelName: "m"});
        for (let round = 0; round < 3; round++) {
            const results = await Promise.all([0, 1, 2].map(() => target.send(request).done));
            for (const result of results)
                assert.equal(result.error, undefined);
        }
        assert.ok(target.resentRequests >= 3, String(target.resentRequests));
    });

    test("a server that drops every connection: the request fails with the socket's message after a bounded number of tries", async () => {
        const server = await startServer("dropAll");
        servers.push(server);
        const target = await OpenAiHttpTarget.connect({baseUrl: server.baseUrl, endpoint: "completions", modelName: "m"});
        const result = await target.send(request).done;
        assert.equal(result.reason, "error");
        assert.match(result.error ?? "", /^POST http:\/\/127\.0\.0\.1:\d+\/v1\/completions: (other side closed|.*ECONNRESET|socket hang up)/);
        assert.equal(target.resentRequests, maxSendAttempts - 1);
        assert.equal(server.connections(), maxSendAttempts);
    });
});
