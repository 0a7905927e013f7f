/**
 * The OpenAI-compatible endpoint with the official `openai` client (and raw HTTP where the SDK would
 * hide the status line), on a real engine and a generated model: both endpoints streaming and not,
 * usage equal to the stats, stop strings, 16 clients on 4 sequences, disconnects, every error case,
 * Host/Origin refusals and API keys; prefix-cache hits reported as `usage.prompt_tokens_details.cached_tokens`.
 */
import assert from "node:assert/strict";
import http from "node:http";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import type {EngineStep} from "../../extension/host/engineClient/engineStep.js";
import {ApiServer, ApiServerError, maxRequestBodyBytes} from "../../extension/host/openai/apiServer.js";
import {StatsPipeline} from "../../extension/host/stats/statsPipeline.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {tinyModelPath} from "../helpers/testModels.js";
import {until, withTimeout} from "../helpers/until.js";

const contextSize = 1024;

type RawResponse = {status: number, headers: http.IncomingHttpHeaders, body: string};

/** One HTTP request with exactly the headers given (fetch would add or forbid some). */
function raw(port: number, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
        const request = http.request({host: "127.0.0.1", port, method, path, headers: {...(body !== undefined ? {"content-type": "application/json"} : {}), ...headers}},
            (response) => {
                let text = "";
                response.setEncoding("utf8");
                response.on("data", (chunk: string) => text += chunk);
                response.on("end", () => resolve({status: response.statusCode ?? 0, headers: response.headers, body: text}));
            });
        request.on("error", reject);
        request.end(body);
    });
}

function errorOf(response: RawResponse): {message: string, type: string, param: string | null, code: string | null} {
    const parsed = JSON.parse(response.body) as {error: {message: string, type: string, param: string | null, code: string | null}};
    assert.equal(typeof parsed.error.message, "string");
    assert.ok("param" in parsed.error && "code" in parsed.error && "type" in parsed.error, response.body);
    return parsed.error;
}

/** The ledger entry of the request behind an API response id (`chatcmpl-` / `cmpl-` + the request id without dashes). */
function ledgerEntry(pipeline: StatsPipeline, responseId: string): RequestLifecycle {
    const key = responseId.replace(/^(chatcmpl|cmpl)-/, "");
    const entry = pipeline.manager.snapshot().requests.find((request) => request.id.replaceAll("-", "") === key);
    assert.ok(entry !== undefined, `no ledger entry for ${responseId}`);
    return entry;
}

/** A usage's token counts without `prompt_tokens_details` (two requests with the same prompt find different amounts cached). */
function countsOf(usage: OpenAI.CompletionUsage | undefined): Omit<OpenAI.CompletionUsage, "prompt_tokens_details"> | undefined {
    if (usage === undefined)
        return undefined;
    const {prompt_tokens_details: _details, ...counts} = usage;
    return counts;
}

/** Fields vLLM and llama.cpp accept beyond OpenAI's (the SDK passes unknown body fields through). */
const ignoreEos = {ignore_eos: true} as Record<string, unknown>;

describe("OpenAI-compatible endpoint", () => {
    let client: EngineClient;
    let pipeline: StatsPipeline;
    let server: ApiServer;
    let openai: OpenAI;
    const steps: EngineStep[] = [];

    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize, parallel: 4, statsIntervalMs: 200});
        pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 0});
        pipeline.attach(client);
        client.observe({onOutputs: (step) => steps.push(step)});
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, metrics: await pipeline.mountMetrics()});
        openai = new OpenAI({baseURL: server.baseUrl, apiKey: "not-needed", maxRetries: 0});
    });
    after(async () => {
        await server.close();
        await client.stop();
        await pipeline.dispose();
    });

    test("GET /v1/models lists the loaded model under a stable id, /v1/models/{id} retrieves it; /health is ok", async () => {
        const models = await openai.models.list();
        assert.equal(models.data.length, 1);
        assert.equal(models.data[0]!.id, "inference-monitor-demo-tiny-seed0-f16-v1");
        assert.deepEqual(await openai.models.retrieve("inference-monitor-demo-tiny-seed0-f16-v1"), models.data[0]);
        for (const id of ["gpt-4o", "%E0%A4%A"])
            await assert.rejects(openai.models.retrieve(id), (error: unknown) => {
                assert.ok(error instanceof OpenAI.NotFoundError, String(error));
                assert.equal(error.code, "model_not_found");
                assert.match(error.message, /does not exist \(this server runs inference-monitor-demo-tiny-seed0-f16-v1\)/);
                return true;
            });
        const malformed = await raw(server.port, "GET", "/v1/models/%E0%A4%A");
        assert.equal(malformed.status, 404, malformed.body);
        assert.equal(errorOf(malformed).code, "model_not_found");
        const health = await raw(server.port, "GET", "/health");
        assert.equal(health.status, 200);
        assert.deepEqual(JSON.parse(health.body), {status: "ok"});
    });

    test("chat, not streamed: text, finish_reason length, usage equal to the stats' record of that request", async () => {
        const completion = await openai.chat.completions.create({
            model: "whatever", messages: [{role: "system", content: "Be brief."}, {role: "user", content: "Tell me a story"}], max_tokens: 12, seed: 3, ...ignoreEos
        });
        const choice = completion.choices[0]!;
        assert.equal(completion.object, "chat.completion");
        assert.equal(choice.finish_reason, "length");
        assert.equal(choice.message.role, "assistant");
        assert.ok(choice.message.content !== null && choice.message.content.length > 0);
        const usage = completion.usage!;
        assert.equal(usage.completion_tokens, 12);
        assert.ok(usage.prompt_tokens > 5, String(usage.prompt_tokens));
        assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
        const entry = ledgerEntry(pipeline, completion.id);
        assert.equal(entry.promptTokens, usage.prompt_tokens);
        assert.equal(entry.generatedTokens, usage.completion_tokens);
        assert.equal(entry.reason, "length");
        assert.equal(entry.client, "openai-js");
    });

    test("chat streamed with include_usage: role first, the same greedy text as unstreamed, then usage, then [DONE]", async () => {
        const params = {model: "m", messages: [{role: "user" as const, content: "Once upon a time"}], max_tokens: 16, temperature: 0, ...ignoreEos};
        const whole = await openai.chat.completions.create(params);
        const stream = await openai.chat.completions.create({...params, stream: true, stream_options: {include_usage: true}});
        let text = "";
        let roleSeen = false;
        let finish: string | null = null;
        let usage: OpenAI.CompletionUsage | undefined;
        let chunks = 0;
        let streamId = "";
        for await (const chunk of stream) {
            chunks++;
            streamId = chunk.id;
            if (chunk.usage) {
                assert.equal(chunk.choices.length, 0);
                usage = chunk.usage;
                continue;
            }
            const choice = chunk.choices[0]!;
            if (choice.delta.role === "assistant")
                roleSeen = true;
            text += choice.delta.content ?? "";
            finish = choice.finish_reason ?? finish;
        }
        assert.ok(roleSeen);
        assert.ok(chunks >= 4, `only ${chunks} chunks`);
        assert.equal(text, whole.choices[0]!.message.content);
        assert.equal(finish, "length");
        assert.deepEqual(countsOf(usage), countsOf(whole.usage));
        // each reports what it found in the prefix cache (the streamed one follows the same prompt: more of it)
        assert.equal(usage?.prompt_tokens_details?.cached_tokens, ledgerEntry(pipeline, streamId).cachedTokens);
        assert.equal(whole.usage?.prompt_tokens_details?.cached_tokens, ledgerEntry(pipeline, whole.id).cachedTokens);
    });

    test("completions, streamed and not, agree; usage matches the stats", async () => {
        const params = {model: "m", prompt: "The little robot", max_tokens: 10, temperature: 0, ...ignoreEos};
        const whole = await openai.completions.create(params);
        assert.equal(whole.object, "text_completion");
        assert.equal(whole.choices[0]!.finish_reason, "length");
        assert.equal(whole.usage!.completion_tokens, 10);
        assert.equal(ledgerEntry(pipeline, whole.id).generatedTokens, 10);
        const stream = await openai.completions.create({...params, stream: true, stream_options: {include_usage: true}});
        let text = "";
        let usage: OpenAI.CompletionUsage | undefined;
        let streamId = "";
        for await (const chunk of stream) {
            text += chunk.choices[0]?.text ?? "";
            usage = chunk.usage ?? usage;
            streamId = chunk.id;
        }
        assert.equal(text, whole.choices[0]!.text);
        assert.deepEqual(countsOf(usage), countsOf(whole.usage));
        assert.equal(usage?.prompt_tokens_details?.cached_tokens, ledgerEntry(pipeline, streamId).cachedTokens);
    });

    test("stop strings: output ends just before the first stop string, which never appears, streamed or not", async () => {
        const params = {model: "m", prompt: "Once there was", max_tokens: 40, temperature: 0, ...ignoreEos};
        const full = (await openai.completions.create(params)).choices[0]!.text;
        assert.ok(full.length > 12, JSON.stringify(full));
        const stop = full.slice(8, 11);
        const expected = full.slice(0, full.indexOf(stop));
        const stopped = await openai.completions.create({...params, stop: [stop, "\u0000never"]});
        assert.equal(stopped.choices[0]!.text, expected);
        assert.equal(stopped.choices[0]!.finish_reason, "stop");
        assert.ok(stopped.usage!.completion_tokens < 40);
        assert.equal(ledgerEntry(pipeline, stopped.id).generatedTokens, stopped.usage!.completion_tokens);
        const stream = await openai.completions.create({...params, stop, stream: true});
        let text = "";
        for await (const chunk of stream)
            text += chunk.choices[0]?.text ?? "";
        assert.equal(text, expected);
        assert.ok(!text.includes(stop));
    });

    test("16 concurrent streaming clients on 4 sequences: all complete, 12 wait, the ledger balances", async () => {
        const before = pipeline.manager.counters().requests;
        const firstStep = steps.length;
        const results = await Promise.all(Array.from({length: 16}, async (_, i) => {
            const stream = await openai.completions.create({model: "m", prompt: `Story ${i}:`, max_tokens: 120, stream: true, seed: i, ...ignoreEos,
                stream_options: {include_usage: true}});
            let usage: OpenAI.CompletionUsage | undefined;
            let finish: string | null | undefined;
            for await (const chunk of stream) {
                usage = chunk.usage ?? usage;
                finish = chunk.choices[0]?.finish_reason ?? finish;
            }
            return {usage, finish};
        }));
        for (const result of results) {
            assert.equal(result.finish, "length");
            assert.equal(result.usage?.completion_tokens, 120);
        }
        const maxWaiting = Math.max(...steps.slice(firstStep).map((step) => step.scheduler?.waiting ?? 0));
        assert.equal(maxWaiting, 12);
        const ledger = pipeline.manager.counters().requests;
        assert.equal(ledger.arrived - before.arrived, 16);
        assert.equal(ledger.completed - before.completed, 16);
        assert.equal(ledger.arrived, ledger.completed + ledger.failed + ledger.aborted + ledger.inFlight);
        assert.equal(ledger.inFlight, 0);
    });

    /** Resolves with the first finished request of `label` recorded as `abort`, and when the host saw it. */
    function nextAbort(label: string): {recorded: Promise<{request: RequestLifecycle, at: number}>, stop: () => void} {
        let found: ((value: {request: RequestLifecycle, at: number}) => void) | undefined;
        const recorded = new Promise<{request: RequestLifecycle, at: number}>((resolve) => found = resolve);
        const stop = client.observe({onOutputs: (step) => {
            for (const finished of step.iteration.finished)
                if (finished.reason === "abort" && finished.client === label)
                    found?.({request: finished, at: performance.now()});
        }});
        return {recorded, stop};
    }

    test("a client that disconnects mid-stream (the openai SDK aborting its stream) has its request recorded as abort", async () => {
        const abort = nextAbort("openai-js");
        const stream = await openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Go on and on"}], max_tokens: 600, stream: true, ...ignoreEos});
        let chunks = 0;
        for await (const _ of stream) {
            if (++chunks === 3) {
                stream.controller.abort();
                break;
            }
        }
        const {request} = await withTimeout(abort.recorded, 2000, "the abort to be recorded");
        abort.stop();
        assert.equal(request.reason, "abort");
        assert.ok(request.generatedTokens < 600);
    });

    test("a disconnect mid-stream cancels its request within 100 ms of the connection closing", async () => {
        // Timed from the client's close(2) on the socket: node:http's destroy() closes it at once, whereas fetch
        // (the SDK's transport, undici) closes it some milliseconds after abort() — 3–12 ms here, more under load.
        const latencies: number[] = [];
        for (let attempt = 0; attempt < 3; attempt++) {
            const abort = nextAbort("disconnect-probe");
            let closedAt = 0;
            await new Promise<void>((resolve, reject) => {
                const body = JSON.stringify({messages: [{role: "user", content: "Go on and on"}], max_tokens: 600, stream: true, ignore_eos: true});
                const request = http.request({host: "127.0.0.1", port: server.port, method: "POST", path: "/v1/chat/completions",
                    headers: {"content-type": "application/json", "user-agent": "disconnect-probe/1"}}, (response) => {
                    let events = 0;
                    response.on("data", (chunk: Buffer) => {
                        events += chunk.toString("utf8").split("data: ").length - 1;
                        if (events >= 3 && closedAt === 0) {
                            closedAt = performance.now();
                            request.destroy();
                            resolve();
                        }
                    });
                });
                request.on("error", (error) => closedAt === 0 ? reject(error) : undefined);
                request.end(body);
            });
            const {request, at} = await withTimeout(abort.recorded, 2000, "the abort to be recorded");
            abort.stop();
            assert.ok(request.generatedTokens < 600);
            latencies.push(at - closedAt);
        }
        // Every one of three disconnects, not the best of them.
        const worst = Math.max(...latencies);
        assert.ok(worst < 100, `abort recorded ${latencies.map((ms) => ms.toFixed(1)).join(", ")} ms after the disconnects`);
    });

    test("malformed JSON and bad fields: 400 in OpenAI's shape, naming the field", async () => {
        const malformed = await raw(server.port, "POST", "/v1/chat/completions", "{not json");
        assert.equal(malformed.status, 400);
        assert.equal(errorOf(malformed).type, "invalid_request_error");
        for (const [body, param] of [
            [{messages: [{role: "user", content: "hi"}], temperature: "hot"}, "temperature"],
            [{messages: [{role: "user", content: "hi"}], n: 0}, "n"],
            [{messages: [{role: "user", content: "hi"}], n: 129}, "n"],
            [{messages: [{role: "wizard", content: "hi"}]}, "messages[0].role"],
            [{messages: [{role: "user", content: [{type: "image_url", image_url: {url: "x"}}]}]}, "messages[0].content[0]"],
            [{messages: []}, "messages"],
            [{messages: [{role: "user", content: "hi"}], max_tokens: 0}, "max_tokens"],
            [{messages: [{role: "user", content: "hi"}], stop: [""]}, "stop[0]"],
            // The tiny model has no chat template to render tools with: a request that demands a call cannot be served (toolCalls.test.ts has the rest).
            [{messages: [{role: "user", content: "hi"}], tools: [{type: "function", function: {name: "f"}}], tool_choice: "required"}, "tool_choice"],
            [{messages: [{role: "user", content: "hi"}], tool_choice: {type: "function", function: {name: "f"}}}, "tool_choice"],
            [{messages: [{role: "user", content: "hi"}], function_call: {name: "f"}}, "function_call"]
        ] as const) {
            const response = await raw(server.port, "POST", "/v1/chat/completions", JSON.stringify(body));
            assert.equal(response.status, 400, response.body);
            assert.equal(errorOf(response).param, param, response.body);
        }
        // "auto" leaves the model free not to call: without a template to offer the tools in, it answers in text.
        const auto = await raw(server.port, "POST", "/v1/chat/completions", JSON.stringify({messages: [{role: "user", content: "hi"}], max_tokens: 2,
            tools: [{type: "function", function: {name: "f", parameters: {type: "object"}}}], tool_choice: "auto"}));
        assert.equal(auto.status, 200, auto.body);
        const badPrompt = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: 42}));
        assert.equal(badPrompt.status, 400);
        assert.equal(errorOf(badPrompt).param, "prompt");
        const fim = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "def f(", suffix: "return x"}));
        assert.equal(fim.status, 400);
        assert.equal(errorOf(fim).param, "suffix");
        assert.match(errorOf(fim).message, /fill-in-the-middle/);
        const notFound = await raw(server.port, "GET", "/v1/audio/speech");
        assert.equal(notFound.status, 404);
        assert.equal(errorOf(notFound).code, "not_found");
        const wrongMethod = await raw(server.port, "GET", "/v1/chat/completions");
        assert.equal(wrongMethod.status, 405);
    });

    test("a body over 1 MiB gets 413", async () => {
        const big = JSON.stringify({prompt: "x".repeat(maxRequestBodyBytes), max_tokens: 1});
        const response = await raw(server.port, "POST", "/v1/completions", big);
        assert.equal(response.status, 413);
        assert.match(errorOf(response).message, /1 MiB/);
        // chunked, without a Content-Length
        const chunked = await raw(server.port, "POST", "/v1/completions", big, {"transfer-encoding": "chunked"});
        assert.equal(chunked.status, 413);
    });

    test("prompt + max_tokens over the context: 400 with both numbers, streamed or not", async () => {
        for (const stream of [false, true]) {
            const response = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "Hello there", max_tokens: contextSize, stream}));
            assert.equal(response.status, 400, response.body);
            const error = errorOf(response);
            assert.equal(error.code, "context_length_exceeded");
            assert.match(error.message, new RegExp(`holds ${contextSize} tokens, but the request needs \\d+`));
        }
        // Without max_tokens the request fits: it may generate up to one sequence's share of the context.
        const fits = await openai.completions.create({model: "m", prompt: "Hello there", temperature: 0});
        assert.ok(fits.usage!.completion_tokens <= contextSize / 4);
    });

    test("queue full: 503 with Retry-After", async () => {
        const tight = await ApiServer.listen({engine: {current: () => client}, port: 0, maxWaiting: 1});
        const controller = new AbortController();
        try {
            // Five long requests through the main endpoint (same engine): four run, one waits.
            const long = Array.from({length: 5}, (_, i) => openai.completions.create(
                {model: "m", prompt: `Long ${i}`, max_tokens: 200, stream: true, ...ignoreEos}, {signal: controller.signal}).then(async (stream) => {
                for await (const _ of stream) {/* drain */}
            }).catch(() => undefined));
            // four running on the four sequences, the fifth waiting for one
            await until(() => client.inFlightCount === 5 && client.waitingCount === 1, 5000, "a waiting request");
            const response = await raw(tight.port, "POST", "/v1/completions", JSON.stringify({prompt: "one more", max_tokens: 4}));
            assert.equal(response.status, 503, response.body);
            assert.equal(response.headers["retry-after"], "1");
            assert.equal(errorOf(response).code, "queue_full");
            controller.abort();
            await Promise.all(long);
        } finally {
            await tight.close();
        }
    });

    test("Host and Origin: DNS-rebinding names and foreign browser pages get 403; the server's own page and SDKs pass", async () => {
        const rebinding = await raw(server.port, "GET", "/v1/models", undefined, {host: `evil.example:${server.port}`});
        assert.equal(rebinding.status, 403);
        const foreign = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "hi", max_tokens: 1}), {origin: "https://evil.example"});
        assert.equal(foreign.status, 403);
        assert.equal(errorOf(foreign).type, "permission_error");
        const preflight = await raw(server.port, "OPTIONS", "/v1/completions", undefined, {"origin": "https://evil.example", "access-control-request-method": "POST"});
        assert.equal(preflight.status, 403);
        const own = await raw(server.port, "GET", "/v1/models", undefined, {origin: `http://127.0.0.1:${server.port}`});
        assert.equal(own.status, 200);
        assert.ok(server.rejectedCount >= 3);
    });

    test("client labels: User-Agent, X-Title", async () => {
        const curl = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "hi", max_tokens: 2}), {"user-agent": "curl/8.5.0"});
        assert.equal(ledgerEntry(pipeline, (JSON.parse(curl.body) as {id: string}).id).client, "curl");
        const cline = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "hi", max_tokens: 2}), {"user-agent": "OpenAI/JS 4.0.0", "x-title": "Cline"});
        assert.equal(ledgerEntry(pipeline, (JSON.parse(cline.body) as {id: string}).id).client, "Cline");
    });

    test("/metrics on the same port: vLLM's counters equal the stats", async () => {
        const response = await raw(server.port, "GET", "/metrics");
        assert.equal(response.status, 200);
        const line = response.body.split("\n").find((l) => l.startsWith("vllm:generation_tokens_total{"));
        assert.ok(line !== undefined, response.body.slice(0, 500));
        assert.equal(Number(line.split(" ").at(-1)), pipeline.manager.counters().generationTokens);
        // As vLLM's, the model_name label is the served model's id, the one GET /v1/models gives.
        const models = JSON.parse((await raw(server.port, "GET", "/v1/models")).body) as {data: Array<{id: string}>};
        assert.match(line, new RegExp(`model_name="${models.data[0]!.id}"`));
    });
});

describe("OpenAI-compatible endpoint: prefix cache hits in usage (one sequence)", () => {
    let client: EngineClient;
    let pipeline: StatsPipeline;
    let server: ApiServer;
    let openai: OpenAI;
    const steps: EngineStep[] = [];
    // 70 words, then a different ending per request: the shared start stays in the one sequence's KV cache.
    const shared = "In a quiet village at the edge of a wide green valley there lived an old clockmaker who repaired every clock " +
        "that the people of the valley brought to him. Each morning he opened the wooden shutters of his small shop, set out his " +
        "tools in a careful row, and listened to the ticking that filled the room while the sun rose over the hills and the baker " +
        "across the street began to sell warm bread to the farmers.";
    const greedy = {model: "m", max_tokens: 8, temperature: 0, ...ignoreEos};

    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize, parallel: 1, statsIntervalMs: 0});
        pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 0});
        pipeline.attach(client);
        client.observe({onOutputs: (step) => steps.push(step)});
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, metrics: await pipeline.mountMetrics()});
        openai = new OpenAI({baseURL: server.baseUrl, apiKey: "not-needed", maxRetries: 0});
    });
    after(async () => {
        await server.close();
        await client.stop();
        await pipeline.dispose();
    });

    test("the second request sharing a long prefix gets cached_tokens > 0, the engine's own count, streamed and not", async () => {
        assert.equal(client.info?.prefixCache, true);
        assert.ok(shared.split(" ").length >= 60);
        const first = await openai.completions.create({...greedy, prompt: `${shared} The first thing he fixed that day was`});
        assert.equal(first.usage?.prompt_tokens_details?.cached_tokens, 0, "nothing cached on a fresh engine");

        const stream = await openai.completions.create({...greedy, prompt: `${shared} The last thing he fixed that day was`,
            stream: true, stream_options: {include_usage: true}});
        let second: OpenAI.CompletionUsage | undefined;
        let secondId = "";
        for await (const chunk of stream) {
            second = chunk.usage ?? second;
            secondId = chunk.id;
        }
        const secondCached = second?.prompt_tokens_details?.cached_tokens ?? -1;
        assert.ok(secondCached > second!.prompt_tokens / 2 && secondCached < second!.prompt_tokens,
            `cached ${secondCached} of ${second!.prompt_tokens} (first prompt: ${first.usage!.prompt_tokens})`);
        assert.equal(ledgerEntry(pipeline, secondId).cachedTokens, secondCached, "what the engine's `scheduled` event said");

        // the same prompt again, not streamed: all but its last token
        const third = await openai.completions.create({...greedy, prompt: `${shared} The last thing he fixed that day was`});
        const thirdCached = third.usage?.prompt_tokens_details?.cached_tokens;
        assert.equal(thirdCached, third.usage!.prompt_tokens - 1);
        assert.equal(ledgerEntry(pipeline, third.id).cachedTokens, thirdCached);

        // the stats: every lookup counted once, in tokens, in the steps, the counters and /metrics
        const queries = first.usage!.prompt_tokens + second!.prompt_tokens + third.usage!.prompt_tokens;
        const hits = secondCached + thirdCached;
        assert.deepEqual([sum(steps, "prefixCacheQueries"), sum(steps, "prefixCacheHits"), sum(steps, "prefixCacheRequests")], [queries, hits, 3]);
        const counters = pipeline.manager.counters();
        assert.deepEqual([counters.prefixCacheQueries, counters.prefixCacheHits], [queries, hits]);
        assert.equal(pipeline.manager.gauges().prefixCacheHitRate, hits / queries);
        const metrics = await raw(server.port, "GET", "/metrics");
        assert.match(metrics.body, new RegExp(`^vllm:prefix_cache_queries_total\\{[^}]*\\} ${queries}$`, "m"));
        assert.match(metrics.body, new RegExp(`^vllm:prefix_cache_hits_total\\{[^}]*\\} ${hits}$`, "m"));
    });

    test("a prompt whose sequence another took is restored from the prompt cache: cached_tokens, vLLM's external counters", async () => {
        assert.equal(client.info?.promptCacheMiB, 2048, "on by default");
        const before = {local: sum(steps, "prefixCacheHits"), external: sum(steps, "externalPrefixCacheHits")};
        const prompt = `${shared} The last thing he fixed that day was`;
        // An unrelated prompt takes the one sequence: what it held is saved first.
        const other = await openai.completions.create({...greedy,
            prompt: "A small bird flew over the house and the tree and said hello to the sun and the moon and the stars in the night sky"});
        assert.ok(other.usage!.prompt_tokens_details!.cached_tokens! <= 2);
        const back = await openai.completions.create({...greedy, prompt});
        const cached = back.usage?.prompt_tokens_details?.cached_tokens;
        assert.equal(cached, back.usage!.prompt_tokens - 1, "all but the last token, restored");
        assert.equal(ledgerEntry(pipeline, back.id).cachedTokens, cached);
        assert.equal(ledgerEntry(pipeline, back.id).restoredTokens, cached, "the request's record says where they came from");

        // Restored tokens count as vLLM counts a KV connector's: external hits, not local ones.
        assert.equal(sum(steps, "externalPrefixCacheHits") - before.external, cached);
        assert.equal(sum(steps, "prefixCacheHits") - before.local, other.usage!.prompt_tokens_details!.cached_tokens);
        const queries = sum(steps, "externalPrefixCacheQueries");
        assert.equal(queries, sum(steps, "prefixCacheQueries"), "every request of this engine looked the prompt cache up");
        const counters = pipeline.manager.counters();
        assert.deepEqual([counters.externalPrefixCacheQueries, counters.externalPrefixCacheHits], [queries, sum(steps, "externalPrefixCacheHits")]);
        assert.equal(pipeline.manager.gauges().externalPrefixCacheHitRate, counters.externalPrefixCacheHits / queries);
        const metrics = await raw(server.port, "GET", "/metrics");
        assert.match(metrics.body, new RegExp(`^vllm:external_prefix_cache_queries_total\\{[^}]*\\} ${queries}$`, "m"));
        assert.match(metrics.body, new RegExp(`^vllm:external_prefix_cache_hits_total\\{[^}]*\\} ${counters.externalPrefixCacheHits}$`, "m"));
    });
});

function sum(steps: readonly EngineStep[], key: "prefixCacheRequests" | "prefixCacheQueries" | "prefixCacheHits" | "externalPrefixCacheQueries" |
    "externalPrefixCacheHits"): number {
    return steps.reduce((total, step) => total + step.iteration[key], 0);
}

describe("OpenAI-compatible endpoint: API keys and binds", () => {
    test("a non-loopback bind without an API key is refused before listening", async () => {
        await assert.rejects(ApiServer.listen({engine: {current: () => undefined}, host: "0.0.0.0", port: 0}), ApiServerError);
    });

    test("with keys: 401 without or with a wrong key, served with the right one, labelled by the key's name", async () => {
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 512, parallel: 2, statsIntervalMs: 0, mode: "inProcess"});
        const pipeline = await StatsPipeline.create({writeLogLine: () => undefined, logIntervalS: 0});
        pipeline.attach(client);
        await client.start();
        const server = await ApiServer.listen({engine: {current: () => client}, host: "0.0.0.0", port: 0, apiKeys: [{name: "continue", key: "sk-secret-1"}]});
        try {
            const base = `http://127.0.0.1:${server.port}/v1`;
            for (const apiKey of ["", "sk-wrong"]) {
                const response = await raw(server.port, "GET", "/v1/models", undefined, apiKey === "" ? {} : {authorization: `Bearer ${apiKey}`});
                assert.equal(response.status, 401);
                assert.equal(errorOf(response).code, "invalid_api_key");
            }
            const openai = new OpenAI({baseURL: base, apiKey: "sk-secret-1", maxRetries: 0});
            const completion = await openai.completions.create({model: "m", prompt: "hi", max_tokens: 3, ...ignoreEos});
            assert.equal(completion.usage!.completion_tokens, 3);
            assert.equal(ledgerEntry(pipeline, completion.id).client, "continue");
            // /health stays open (load balancers and tools probe it without keys)
            assert.equal((await raw(server.port, "GET", "/health")).status, 200);
        } finally {
            await server.close();
            await client.stop();
            await pipeline.dispose();
        }
    });
});

describe("OpenAI-compatible endpoint: engine loading, crashing, stopped", () => {
    test("503 while loading and without a model; an engine crash ends open streams with an error event", async () => {
        let current: EngineClient | undefined;
        const server = await ApiServer.listen({engine: {current: () => current}, port: 0});
        try {
            const none = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "hi", max_tokens: 2}));
            assert.equal(none.status, 503);
            assert.equal(errorOf(none).code, "engine_unavailable");
            assert.equal((await raw(server.port, "GET", "/health")).status, 503);

            const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 512, parallel: 2, statsIntervalMs: 0});
            current = client;
            const started = client.start();
            const loading = await raw(server.port, "GET", "/health");
            if (client.state === "loading") {
                assert.equal(loading.status, 503);
                assert.equal(errorOf(loading).message, "Loading model");
            }
            await started;
            assert.equal((await raw(server.port, "GET", "/health")).status, 200);

            const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "x", maxRetries: 0});
            const stream = await openai.completions.create({model: "m", prompt: "Go", max_tokens: 400, stream: true, ...ignoreEos});
            let chunks = 0;
            const consumed = (async () => {
                for await (const _ of stream)
                    if (++chunks === 2)
                        process.kill(client.info!.pid, "SIGKILL");
            })();
            await assert.rejects(consumed, (error: unknown) => error instanceof OpenAI.APIError && /engine exited/.test(error.message));
            await until(() => client.state === "crashed", 5000, "the crash to be noticed");
            const after = await raw(server.port, "POST", "/v1/completions", JSON.stringify({prompt: "hi", max_tokens: 2}));
            assert.equal(after.status, 503);
            assert.equal((await raw(server.port, "GET", "/health")).status, 503);
            await client.stop();
        } finally {
            await server.close();
        }
    });
});
