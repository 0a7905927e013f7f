/**
 * The monitoring proxy in front of real servers: our own `serve` (vLLM-compatible), llama.cpp's
 * `llama-server` when built, and an Ollama-shaped NDJSON stream. What passes is unchanged (same text,
 * same usage, same SSE events); what the proxy records equals what the servers say; a client that
 * goes away cancels the upstream request; a dead upstream is a 502 in OpenAI's shape.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type {AddressInfo, Socket} from "node:net";
import {after, before, describe, test} from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {MonitoringProxy} from "../../extension/host/proxy/monitoringProxy.js";
import {ProxyStats} from "../../extension/host/proxy/proxyStats.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {buildLlamaServer, freeLoopbackPort, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {startServe, type ServeProcess} from "../../scripts/serveProcess.js";
import {runCli} from "../helpers/runCli.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";

async function proxied(upstream: string): Promise<{proxy: MonitoringProxy, manager: StatsManager, reached: Array<boolean>}> {
    const manager = new StatsManager({tickIntervalMs: 0});
    manager.onEngineState("ready");
    const reached: boolean[] = [];
    const proxy = await MonitoringProxy.listen({upstream, stats: new ProxyStats(manager), onUpstream: (ok) => reached.push(ok)});
    return {proxy, manager, reached};
}

/** The text and usage of a streamed chat completion. */
async function streamChat(openai: OpenAI, content: string, maxTokens: number): Promise<{text: string, prompt: number, completion: number}> {
    const stream = await openai.chat.completions.create({
        model: "m", messages: [{role: "user", content}], max_tokens: maxTokens, temperature: 0, seed: 1, stream: true,
        stream_options: {include_usage: true}, ...{ignore_eos: true}
    });
    let text = "";
    let usage: {prompt: number, completion: number} | undefined;
    for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        if (chunk.usage !== undefined && chunk.usage !== null)
            usage = {prompt: chunk.usage.prompt_tokens, completion: chunk.usage.completion_tokens};
    }
    assert.ok(usage !== undefined);
    return {text, ...usage};
}

/** An HTTP relay to `origin` that keeps every answer's content type and body as the server sent them. */
async function recordingRelay(origin: string): Promise<{url: string, answers: Array<{contentType: string | undefined, body: string}>, close(): Promise<void>}> {
    const answers: Array<{contentType: string | undefined, body: string}> = [];
    const server = http.createServer((request, response) => {
        const forwarded = http.request(new URL(request.url ?? "/", origin), {method: request.method, headers: {...request.headers, host: new URL(origin).host}},
            (answer) => {
                response.writeHead(answer.statusCode ?? 502, answer.headers);
                const chunks: Buffer[] = [];
                answer.on("data", (chunk: Buffer) => {
                    chunks.push(chunk);
                    response.write(chunk);
                });
                answer.on("end", () => {
                    answers.push({contentType: answer.headers["content-type"], body: Buffer.concat(chunks).toString()});
                    response.end();
                });
            });
        forwarded.on("error", () => response.destroy());
        request.pipe(forwarded);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answers,
        close: async () => await new Promise<void>((resolve) => server.close(() => resolve()))
    };
}

/** The `data:` payloads of an SSE body. */
function sseData(body: string): string[] {
    return body.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6));
}

describe("monitoring proxy in front of `inference-monitor serve`", () => {
    let upstream: ServeProcess;
    let origin: string;
    let proxy: MonitoringProxy;
    let manager: StatsManager;

    before(async () => {
        upstream = await startServe(await tinyModelPath(), ["--parallel", "2", "--threads", "1", "--context-size", "1024", "--log-interval", "3600"]);
        origin = upstream.baseUrl.replace(/\/v1$/, "");
        ({proxy, manager} = await proxied(origin));
    });
    after(async () => {
        await proxy?.close();
        await upstream?.stop();
    });

    test("the same answer as direct, and the proxy records exactly the server's usage, TTFT and ITLs, labelled by client", async () => {
        const direct = await streamChat(new OpenAI({baseURL: upstream.baseUrl, apiKey: "none", maxRetries: 0}), "Tell me a story", 24);
        const through = await streamChat(new OpenAI({baseURL: `${proxy.url}/v1`, apiKey: "none", maxRetries: 0}), "Tell me a story", 24);
        assert.deepEqual(through, direct, "text and usage unchanged by the proxy");
        const counters = manager.counters();
        assert.deepEqual(counters.requests, {arrived: 1, inFlight: 0, completed: 1, failed: 0, aborted: 0, byReason: {stop: 0, length: 1, abort: 0, error: 0}});
        assert.equal(counters.generationTokens, through.completion);
        assert.equal(counters.promptTokens, through.prompt);
        const [request] = manager.snapshot().requests;
        assert.equal(request!.client, "openai-js");
        assert.equal(request!.generatedTokens, 24);
        assert.ok(request!.metrics.ttftS! > 0 && request!.metrics.e2eS! >= request!.metrics.ttftS!);
        assert.equal(request!.metrics.queueS, undefined, "the server's queue time is not the proxy's to know");
        const itls = manager.windowValues("itl");
        assert.ok(itls.length >= 1 && itls.length <= 23, `one ITL per gap between chunks: ${itls.length}`);
        assert.ok(itls.every((v) => v >= 0));
    });

    test("Responses API traffic is measured too: streamed and whole, the server's usage and the stream's TTFT", async () => {
        const openai = new OpenAI({baseURL: `${proxy.url}/v1`, apiKey: "none", maxRetries: 0});
        const before = manager.counters();
        const stream = openai.responses.stream({model: "m", input: "Tell me a story", max_output_tokens: 20, temperature: 1, seed: 3});
        let deltas = 0;
        let streamed: OpenAI.Responses.Response | undefined;
        stream.on("response.output_text.delta", () => deltas++);
        // Cut by max_output_tokens, it ends with response.incomplete (the SDK's finalResponse keeps only a completed one's usage).
        stream.on("response.incomplete", (event) => streamed = event.response);
        await stream.finalResponse();
        assert.ok(streamed?.usage !== undefined && streamed.usage !== null);
        const whole = await openai.responses.create({model: "m", input: "Once upon a time", max_output_tokens: 7});
        const after = manager.counters();
        assert.equal(after.requests.arrived - before.requests.arrived, 2);
        assert.equal(after.requests.byReason.length - before.requests.byReason.length, 2, "both cut by max_output_tokens");
        assert.equal(after.generationTokens - before.generationTokens, streamed.usage.output_tokens + whole.usage!.output_tokens);
        assert.equal(after.promptTokens - before.promptTokens, streamed.usage.input_tokens + whole.usage!.input_tokens);
        const [first, second] = manager.snapshot().requests.slice(-2);
        assert.ok(first!.metrics.ttftS! > 0 && first!.metrics.ttftS! < first!.metrics.e2eS!, JSON.stringify(first!.metrics));
        assert.ok(deltas > 1 && manager.windowValues("itl").length > 0);
        assert.equal(second!.generatedTokens, 7);
    });

    test("Anthropic Messages traffic is measured too: the server's usage, TTFT from the first delta", async () => {
        const anthropic = new Anthropic({baseURL: proxy.url.replace(/\/$/, ""), apiKey: "none", maxRetries: 0});
        const before = manager.counters();
        const streamed = await anthropic.messages.stream({model: "m", max_tokens: 20, messages: [{role: "user", content: "Tell me a story"}]})
            .finalMessage();
        const whole = await anthropic.messages.create({model: "m", max_tokens: 7, system: "Be brief.", messages: [{role: "user", content: "Hi"}]});
        const after = manager.counters();
        const inputOf = (message: Anthropic.Message): number => message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0);
        assert.equal(after.requests.arrived - before.requests.arrived, 2);
        assert.equal(after.requests.byReason.length - before.requests.byReason.length, 2, "both cut by max_tokens");
        assert.equal(after.generationTokens - before.generationTokens, 27);
        assert.equal(after.promptTokens - before.promptTokens, inputOf(streamed) + inputOf(whole));
        const [first] = manager.snapshot().requests.slice(-2);
        assert.ok(first!.metrics.ttftS! > 0 && first!.metrics.ttftS! < first!.metrics.e2eS!, JSON.stringify(first!.metrics));
        assert.equal(first!.client, "anthropic-js");
    });

    test("SSE passes event for event; non-streamed answers and other paths pass too", async () => {
        // How a server groups tokens into events depends on timing, so the client's events are compared with what the
        // server sent for that same request, read on the way by a relay between the proxy and the server.
        const relay = await recordingRelay(origin);
        const tapped = await proxied(relay.url);
        try {
            const body = JSON.stringify({model: "m", prompt: "Once upon a time", max_tokens: 12, temperature: 0, stream: true, ignore_eos: true});
            const through = await fetch(`${tapped.proxy.url}/v1/completions`, {method: "POST", headers: {"Content-Type": "application/json"}, body});
            const received = sseData(await through.text());
            assert.equal(relay.answers.length, 1);
            const [sent] = relay.answers;
            assert.equal(through.headers.get("content-type"), sent!.contentType);
            assert.ok(received.length >= 3 && received.at(-1) === "[DONE]", received.join("\n"));
            assert.deepEqual(received, sseData(sent!.body));
            // No usage asked for: the proxy takes the server's counts from llama.cpp's `timings` on the last chunk, not the
            // number of chunks (a chunk may carry several tokens).
            const counters = tapped.manager.counters();
            assert.equal(counters.requests.completed, 1);
            assert.equal(counters.generationTokens, 12);
            const timings = sseData(sent!.body).filter((data) => data.includes("\"timings\""))
                .map((data) => (JSON.parse(data) as {timings: {cache_n: number, prompt_n: number}}).timings).at(-1);
            assert.ok(timings !== undefined && timings.prompt_n > 0);
            assert.equal(counters.promptTokens, timings.cache_n + timings.prompt_n);
        } finally {
            await tapped.proxy.close();
            await relay.close();
        }
        const arrived = manager.counters().requests.arrived;
        const whole = await (await fetch(`${proxy.url}/v1/completions`, {method: "POST", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({model: "m", prompt: "Hello", max_tokens: 5, ignore_eos: true})})).json() as {usage: {completion_tokens: number}};
        assert.equal(whole.usage.completion_tokens, 5);
        const models = await (await fetch(`${proxy.url}/v1/models`)).json() as {data: unknown[]};
        assert.equal(models.data.length, 1, "GET /v1/models forwarded, not measured");
        assert.equal(manager.counters().requests.arrived - arrived, 1, "the generation request only");
        const notForwarded = await fetch(`${proxy.url}/metrics`);
        assert.equal(notForwarded.status, 404);
        assert.match(((await notForwarded.json()) as {error: {message: string}}).error.message, /forwards \/v1\/\*, \/api\/\* and llama\.cpp's own routes only/);
    });

    test("a client that goes away cancels the upstream request: both record an abort", async () => {
        const before = manager.counters().requests.aborted;
        const controller = new AbortController();
        const response = await fetch(`${proxy.url}/v1/completions`, {
            method: "POST", headers: {"Content-Type": "application/json"}, signal: controller.signal,
            body: JSON.stringify({model: "m", prompt: "A long story", max_tokens: 900, ignore_eos: true, stream: true})
        });
        const reader = response.body!.getReader();
        await reader.read();
        const abortedAt = Date.now();
        controller.abort();
        const upstreamAborts = async () => {
            const text = await (await fetch(`${origin}/metrics`)).text();
            return Number(/^vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} (\S+)$/m.exec(text)?.[1] ?? "0");
        };
        while (manager.counters().requests.aborted === before || await upstreamAborts() === 0) {
            assert.ok(Date.now() - abortedAt < 2000, "both sides recorded the abort");
            await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.equal(manager.counters().requests.aborted, before + 1);
        assert.ok(Date.now() - abortedAt < 1000, `aborted after ${Date.now() - abortedAt} ms`);
    });

    test("Host and Origin are checked like our other servers", async () => {
        const status = async (headers: Record<string, string>) => await new Promise<number>((resolve, reject) => {
            const request = http.request(`${proxy.url}/v1/models`, {headers}, (response) => {
                response.resume();
                resolve(response.statusCode ?? 0);
            });
            request.on("error", reject);
            request.end();
        });
        assert.equal(await status({Host: "evil.example"}), 403);
        assert.equal(await status({Origin: "http://evil.example"}), 403);
        assert.equal(await status({}), 200);
    });
});

describe("monitoring proxy: dead upstream, Ollama's stream, the command", () => {
    test("an upstream that cannot be reached: 502 in OpenAI's shape, recorded as an error", async () => {
        const {proxy, manager, reached} = await proxied(`http://127.0.0.1:${await freeLoopbackPort()}`);
        try {
            const response = await fetch(`${proxy.url}/v1/chat/completions`, {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({model: "m", messages: [{role: "user", content: "hi"}]})});
            assert.equal(response.status, 502);
            const body = await response.json() as {error: {message: string, type: string, code: string}};
            assert.equal(body.error.code, "upstream_unreachable");
            assert.match(body.error.message, /could not be reached: .*ECONNREFUSED/);
            assert.equal(manager.counters().requests.failed, 1);
            assert.deepEqual(reached, [false]);
        } finally {
            await proxy.close();
        }
    });

    test("an upstream that closes kept-alive connections (as llama-server does): the request goes out again on a new one", async () => {
        // Drops a connection as soon as a second request arrives on it: the proxy's pooled socket is then certainly dead.
        const served = new WeakSet<Socket>();
        let connections = 0;
        let bodies: string[] = [];
        const upstream = http.createServer((incoming, response) => {
            if (served.has(incoming.socket)) {
                incoming.socket.destroy();
                return;
            }
            served.add(incoming.socket);
            let body = "";
            incoming.setEncoding("utf8").on("data", (chunk: string) => body += chunk);
            incoming.on("end", () => {
                bodies.push(body);
                response.writeHead(200, {"Content-Type": "text/event-stream"});
                response.write(`data: ${JSON.stringify({choices: [{index: 0, text: "Hi", finish_reason: "length"}]})}\n\n`);
                response.end("data: [DONE]\n\n");
            });
        });
        upstream.on("connection", () => connections++);
        await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
        const {proxy, manager} = await proxied(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
        try {
            bodies = [];
            for (let i = 0; i < 4; i++) {
                const body = JSON.stringify({model: "m", prompt: `request ${i}`, stream: true});
                const response = await fetch(`${proxy.url}/v1/completions`, {method: "POST", headers: {"Content-Type": "application/json"}, body});
                assert.equal(response.status, 200);
                assert.match(await response.text(), /"text":"Hi"/);
            }
            assert.deepEqual(bodies.map((b) => (JSON.parse(b) as {prompt: string}).prompt), ["request 0", "request 1", "request 2", "request 3"],
                "each body arrived whole, once");
            assert.equal(connections, 4, "one new connection per request, after the dead one");
            assert.equal(manager.counters().requests.completed, 4);
        } finally {
            await proxy.close();
            upstream.closeAllConnections();
            upstream.close();
        }
    });

    test("Ollama's NDJSON stream: text as it comes, counts from its final eval counts", async () => {
        // Ollama's /api/generate stream as its API documentation shows it, one object per line.
        const lines = [
            {model: "llama3.2", created_at: "2025-01-01T00:00:00Z", response: "The", done: false},
            {model: "llama3.2", created_at: "2025-01-01T00:00:00Z", response: " sky", done: false},
            {model: "llama3.2", created_at: "2025-01-01T00:00:00Z", response: " is blue", done: false},
            {model: "llama3.2", created_at: "2025-01-01T00:00:00Z", response: "", done: true, done_reason: "stop",
                total_duration: 10706818083, prompt_eval_count: 26, eval_count: 4}
        ];
        const ollama = http.createServer((_request, response) => {
            response.writeHead(200, {"Content-Type": "application/x-ndjson"});
            let i = 0;
            const next = () => {
                response.write(`${JSON.stringify(lines[i++])}\n`);
                if (i < lines.length) setTimeout(next, 15);
                else response.end();
            };
            next();
        });
        await new Promise<void>((resolve) => ollama.listen(0, "127.0.0.1", resolve));
        const {proxy, manager} = await proxied(`http://127.0.0.1:${(ollama.address() as AddressInfo).port}`);
        try {
            const text = await (await fetch(`${proxy.url}/api/generate`, {method: "POST", body: JSON.stringify({model: "llama3.2", prompt: "Why is the sky blue?"})})).text();
            assert.equal(text, lines.map((line) => `${JSON.stringify(line)}\n`).join(""), "byte for byte");
            const counters = manager.counters();
            assert.equal(counters.requests.completed, 1);
            assert.equal(counters.generationTokens, 4, "Ollama's eval_count, though 3 pieces of text streamed");
            assert.equal(counters.promptTokens, 26);
            assert.equal(manager.windowValues("itl").length, 2, "gaps between the 3 pieces");
            assert.ok(manager.windowValues("itl").every((v) => v >= 0.005));
        } finally {
            await proxy.close();
            ollama.close();
        }
    });

    test("`proxy --upstream`: tools use it like the server; its dashboard's /metrics counts what passed", async () => {
        const upstream = await startServe(await tinyModelPath(), ["--parallel", "1", "--threads", "1", "--context-size", "512", "--log-interval", "3600"]);
        try {
            let metrics = "";
            let completion = 0;
            const run = await runCli(["proxy", "--upstream", upstream.baseUrl, "--port", "0", "--monitor-port", "0", "--log-interval", "0"], {
                timeoutMs: 60_000,
                onStdout: (text, child) => {
                    const proxyUrl = /Proxy: (http:\S+\/v1)/.exec(text)?.[1];
                    const monitor = /Metrics: (http:\S+\/metrics)/.exec(text)?.[1];
                    if (proxyUrl === undefined || monitor === undefined || completion !== 0)
                        return;
                    completion = -1;
                    void (async () => {
                        const result = await streamChat(new OpenAI({baseURL: proxyUrl, apiKey: "none", maxRetries: 0}), "Hi", 7);
                        completion = result.completion;
                        metrics = await (await fetch(monitor)).text();
                        child.kill("SIGINT");
                    })();
                }
            });
            assert.equal(run.code, 0, run.stderr);
            assert.match(run.stdout, /Proxy: http:\/\/127\.0\.0\.1:\d+\/v1 → http:\/\/127\.0\.0\.1:\d+ \(vllm, /);
            assert.equal(completion, 7);
            assert.match(metrics, /^vllm:generation_tokens_total\{[^}]*\} 7$/m);
            assert.match(metrics, /^vllm:time_to_first_token_seconds_count\{[^}]*\} 1$/m);
        } finally {
            await upstream.stop();
        }
        const bad = await runCli(["proxy", "--upstream", "localhost:8080"], {timeoutMs: 20_000});
        assert.equal(bad.code, 2);
        assert.match(bad.stderr, /--upstream must be an http or https URL/);
    });
});

const llamaServerSuite = "monitoring proxy in front of llama.cpp's llama-server";
describe(llamaServerSuite, {skip: llamaServerSkipReason(llamaServerSuite)}, () => {
    let server: LlamaServer;

    before(async () => {
        const model = await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        server = await startLlamaServer({binary: await buildLlamaServer(), model, args: ["-t", "1", "-np", "2", "-c", "2048", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await server?.stop();
    });

    test("streams pass; the proxy's counts equal llama-server's usage", async () => {
        const {proxy, manager} = await proxied(server.origin);
        try {
            const openai = new OpenAI({baseURL: `${proxy.url}/v1`, apiKey: "none", maxRetries: 0});
            const results = await Promise.all([0, 1, 2].map((i) => streamChat(openai, `Story ${i}`, 20)));
            const counters = manager.counters();
            assert.equal(counters.requests.completed, 3);
            assert.equal(counters.generationTokens, results.reduce((sum, r) => sum + r.completion, 0));
            assert.equal(counters.promptTokens, results.reduce((sum, r) => sum + r.prompt, 0));
            assert.equal(manager.windowValues("ttft").length, 3);
        } finally {
            await proxy.close();
        }
    });

    test("llama.cpp's own /completion (what llama.vscode's /infill answers like): streamed and whole, its counts and stop type", async () => {
        const {proxy, manager} = await proxied(server.origin);
        try {
            const body = {prompt: "Once upon a time", n_predict: 9, temperature: 0, ignore_eos: true};
            const whole = await (await fetch(`${proxy.url}/completion`, {method: "POST", body: JSON.stringify(body)})).json() as
                {content: string, tokens_evaluated: number, tokens_predicted: number};
            const streamed = await (await fetch(`${proxy.url}/completion`, {method: "POST", body: JSON.stringify({...body, stream: true})})).text();
            const events = streamed.split("\n\n").filter((part) => part.startsWith("data: ")).map((part) => JSON.parse(part.slice(6)) as
                {content: string, stop: boolean, tokens_evaluated?: number, tokens_predicted?: number});
            assert.equal(events.map((event) => event.content).join(""), whole.content, "passed unchanged");
            const counters = manager.counters();
            assert.equal(counters.requests.completed, 2);
            assert.equal(counters.generationTokens, 2 * whole.tokens_predicted);
            assert.equal(counters.promptTokens, whole.tokens_evaluated + events.at(-1)!.tokens_evaluated!);
            assert.equal(manager.windowValues("ttft").length, 2);
            assert.deepEqual(counters.requests.byReason, {stop: 0, length: 2, abort: 0, error: 0}, "stop_type limit is a length finish");
            // Its other routes pass too.
            assert.equal((await fetch(`${proxy.url}/health`)).status, 200);
            assert.equal((await fetch(`${proxy.url}/tokenize`, {method: "POST", body: JSON.stringify({content: "Once"})})).status, 200);
            const slots = await (await fetch(`${proxy.url}/slots`)).json() as Array<{id: number}>;
            assert.deepEqual(slots.map((slot) => slot.id), [0, 1], "llama-server's two slots");
            const template = await fetch(`${proxy.url}/apply-template`, {method: "POST", body: JSON.stringify({messages: [{role: "user", content: "Hi"}]})});
            assert.equal(template.status, 200, await template.text());
        } finally {
            await proxy.close();
        }
    });
});
