/**
 * Watching real servers (issue G): llama.cpp's own `llama-server` (built by `.ci/build-llama-server.sh`
 * from the llama.cpp source node-llama-cpp ships) and two `inference-monitor serve` processes as vLLM
 * replicas, polled by TargetMonitor into a StatsManager; the numbers are checked against what the
 * servers themselves report (usage, their own /metrics). Then bad targets, and the `watch` command.
 * Skips when llama-server is not built, unless CI=true.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type {AddressInfo} from "node:net";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {TargetMonitor, type WatchedTarget} from "../../extension/host/targets/targetMonitor.js";
import type {TargetView} from "../../protocol/targetView.js";
import {buildLlamaServer, freeLoopbackPort, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {startServe, type ServeProcess} from "../../scripts/serveProcess.js";
import {DashboardServer} from "../../extension/host/dashboard/dashboardServer.js";
import {generationByEngine, parsePrometheusTextFormat} from "../helpers/prometheusText.js";
import {onceMetricsUrl, runCli} from "../helpers/runCli.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {canvasInk} from "../webview/canvasInk.js";
import {chromiumSkipReason, launchChromium} from "../webview/chromium.js";
import {ensurePanelBuilt, webviewDistDir} from "../webview/panelBuild.js";
import {testCacheDir, tinyModelPath} from "../helpers/testModels.js";

function watch(targets: WatchedTarget[], ticking = false): {monitor: TargetMonitor, manager: StatsManager, views: TargetView[]} {
    const manager = new StatsManager(ticking ? {} : {tickIntervalMs: 0});
    const views: TargetView[] = [];
    const monitor = new TargetMonitor({
        targets, timeoutMs: 3000,
        sink: {
            onEngineState: (state) => manager.onEngineState(state),
            onOutputs: (step) => manager.onOutputs(step),
            onTarget: (view) => {
                manager.onTarget(view);
                if (view !== null) views.push(view);
            }
        }
    });
    return {monitor, manager, views};
}

type Tile = {text: string, value: string, notReported: boolean, estimated: boolean};

/**
 * The real panel in Chromium on a DashboardServer fed by `manager`, after `work` ran and the tiles
 * settled: every tile, the header's servers and notes, and whether the throughput chart drew a line.
 */
async function panelAfter(manager: StatsManager, work: () => Promise<void>, settled: () => boolean):
Promise<{tiles: Record<string, Tile>, servers: string, notes: string, throughputInk: number, sequences: string[], sequencesNote: string}> {
    ensurePanelBuilt();
    const dashboard = await DashboardServer.listen({port: 0, source: manager, webviewDir: webviewDistDir});
    const browser = await launchChromium();
    try {
        const page = await browser.context.newPage();
        await page.goto(dashboard.url);
        await work();
        await page.waitForFunction(settled, undefined, {timeout: 15_000});
        const tiles = await page.$$eval("[data-metric]", (elements) => Object.fromEntries(elements.map((element) => {
            const html = element as HTMLElement;
            return [html.dataset.metric!, {text: html.textContent ?? "", value: html.dataset.value ?? "",
                notReported: html.dataset.notReported === "true", estimated: html.dataset.estimated === "true"}];
        })));
        const servers = await page.$eval("[data-field=servers]", (element) => element.textContent ?? "");
        const notes = await page.$eval("[data-field=notes]", (element) => element.textContent ?? "");
        // The generation series in the throughput chart (its line needs a sample or two after the work).
        let throughputInk = 0;
        for (const deadline = Date.now() + 10_000; throughputInk <= 50 && Date.now() < deadline;) {
            throughputInk = (await canvasInk(page, "throughput", "--im-blue")).colored;
            if (throughputInk <= 50)
                await new Promise((resolve) => setTimeout(resolve, 250));
        }
        // The Sequences card's rows ("state|label|text").
        const sequences = await page.$$eval("[data-card=sequences] .sequence-row", (rows) => rows.map((row) =>
            `${(row as HTMLElement).dataset.state}|${row.querySelector(".sequence-index")!.textContent}|${row.querySelector(".sequence-text")!.textContent}`));
        const sequencesNote = await page.$eval("[data-card=sequences] .card-note", (element) => element.textContent ?? "");
        return {tiles, servers, notes, throughputInk, sequences, sequencesNote};
    } finally {
        await browser.close();
        await dashboard.close();
    }
}

/**
 * Polls until the manager's generation count reaches `expected` (llama.cpp adds a request's tokens to
 * its counter as the request ends, so a poll in that moment sees them in neither place; the next one
 * does): never above it, at most 2 s.
 */
async function settle(monitor: TargetMonitor, manager: StatsManager, expected: number): Promise<void> {
    for (let i = 0; i < 40; i++) {
        await monitor.pollOnce();
        const counted = manager.counters().generationTokens;
        assert.ok(counted <= expected, `counted ${counted} generation tokens, more than the ${expected} served`);
        if (counted === expected)
            return;
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(manager.counters().generationTokens, expected);
}

/** A streamed completion read to its end; its usage. */
async function complete(openai: OpenAI, maxTokens: number, prompt: string): Promise<{prompt: number, completion: number}> {
    const stream = await openai.completions.create({
        model: "m", prompt, max_tokens: maxTokens, stream: true, stream_options: {include_usage: true},
        // vLLM's and llama.cpp's extension field: exactly max_tokens
        ...{ignore_eos: true}
    });
    let usage: {prompt: number, completion: number} | undefined;
    for await (const chunk of stream)
        if (chunk.usage !== undefined && chunk.usage !== null)
            usage = {prompt: chunk.usage.prompt_tokens, completion: chunk.usage.completion_tokens};
    assert.ok(usage !== undefined, "the stream carried usage");
    assert.equal(usage.completion, maxTokens);
    return usage;
}

const llamaServerSuite = "watching llama.cpp's llama-server";
describe(llamaServerSuite, {skip: llamaServerSkipReason(llamaServerSuite)}, () => {
    let binary: string;
    let model: string;
    let server: LlamaServer;
    let port: number;
    const args = ["-t", "1", "-np", "2", "-c", "4096", "--no-webui", "--metrics"];

    before(async () => {
        binary = await buildLlamaServer();
        // Text-only: this llama-server refuses to stream text that is not valid UTF-8, which random weights produce.
        model = await ensureDemoModel({size: "tiny", textOnly: true, cacheDir: testCacheDir});
        port = await freeLoopbackPort();
        server = await startLlamaServer({binary, model, args, port, readyTimeoutMs: 30_000});
    });
    after(async () => {
        await server?.stop();
    });

    test("sees slots running and requests waiting; counts exactly the tokens the server's usage reports", async () => {
        const {monitor, manager, views} = watch([{url: server.origin}]);
        await monitor.pollOnce();
        assert.equal(views.at(-1)!.replicas[0]!.status, "up", JSON.stringify(views.at(-1)));
        assert.equal(views.at(-1)!.replicas[0]!.kind, "llamacpp", "told apart without --kind");
        assert.equal(manager.state, "idle");
        const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
        // Three long requests on two slots: two run, one waits.
        const requests = Promise.all([0, 1, 2].map((i) => complete(openai, 300, `Request ${i}: once upon a time`)));
        let done = false;
        void requests.finally(() => done = true);
        let maxRunning = 0;
        let maxWaiting = 0;
        while (!done) {
            await monitor.pollOnce();
            maxRunning = Math.max(maxRunning, manager.gauges().running);
            maxWaiting = Math.max(maxWaiting, manager.gauges().waiting);
            assert.ok(manager.gauges().generationTokensPerS >= 0);
            await new Promise((resolve) => setTimeout(resolve, 30));
        }
        const usages = await requests;
        await settle(monitor, manager, usages.reduce((sum, u) => sum + u.completion, 0));
        assert.equal(maxRunning, 2, "both slots seen busy");
        const slotViews = views.flatMap((view) => view.replicas[0]?.slots ?? []);
        assert.ok(slotViews.some((slot) => slot.processing && slot.tokens > 0), "a busy slot with the tokens it holds");
        assert.deepEqual(views.at(-1)!.replicas[0]!.slots!.map((slot) => slot.processing), [false, false]);
        assert.equal(maxWaiting, 1, "the third request seen deferred");
        const counters = manager.counters();
        assert.equal(counters.generationTokens, usages.reduce((sum, u) => sum + u.completion, 0));
        assert.equal(counters.promptTokens, usages.reduce((sum, u) => sum + u.prompt, 0));
        assert.ok(manager.gauges().generationTokensPerS > 0);
        const view = views.at(-1)!;
        assert.ok(view.notReported.includes("time to first token"), view.notReported.join(", "));
        assert.ok(!view.notReported.includes("generation tokens"));
        assert.equal(view.estimated.ttft, undefined, "llama.cpp exports no latency histograms");
    });

    test("a restart: unreachable (with since and why), back up, counters start again from 0 without a negative rate", async () => {
        const {monitor, manager, views} = watch([{url: server.origin}]);
        await monitor.pollOnce();
        const openai = () => new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
        await complete(openai(), 40, "Before the restart");
        await settle(monitor, manager, 40);
        await server.stop();
        const downAt = Date.now();
        await monitor.pollOnce();
        const down = views.at(-1)!.replicas[0]!;
        assert.equal(down.status, "unreachable");
        assert.match(down.error ?? "", /connection refused/);
        assert.ok(down.since >= downAt - 5);
        assert.equal(manager.state, "crashed");
        server = await startLlamaServer({binary, model, args, port, readyTimeoutMs: 30_000});
        await monitor.pollOnce();
        assert.equal(views.at(-1)!.replicas[0]!.status, "up");
        await complete(openai(), 25, "After the restart");
        await settle(monitor, manager, 65); // 40 before + 25 after; the reset is not a negative increase
        manager.tick();
        for (const point of manager.snapshot().timeSeries)
            assert.ok(point.generationTokensPerS >= 0 && point.promptTokensPerS >= 0);
    });

    test("the panel in Chromium: throughput and running filled, latencies 'not reported', the server listed up", {skip: chromiumSkipReason()}, async () => {
        const {monitor, manager} = watch([{url: server.origin}], true);
        await monitor.pollOnce();
        monitor.start();
        try {
            const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
            const {tiles, servers, notes, throughputInk, sequences, sequencesNote} = await panelAfter(manager,
                async () => void await Promise.all([0, 1].map((i) => complete(openai, 200, `Panel ${i}`))),
                // Throughput shown, and a poll after the requests ended (one during them shows the slots busy).
                () => Number(document.querySelector<HTMLElement>("[data-metric=output_throughput]")?.dataset.value) > 0 &&
                    document.querySelectorAll("[data-card=sequences] .sequence-row[data-state=free]").length === 2);
            assert.ok(Number(tiles.output_throughput!.value) > 0);
            assert.ok(!tiles.num_requests_running!.notReported, "llama.cpp reports its busy slots");
            for (const key of ["median_ttft_ms", "p99_itl_ms", "median_e2el_ms", "completed"]) {
                assert.equal(tiles[key]!.text, "not reported", key);
                assert.ok(tiles[key]!.notReported, key);
            }
            assert.match(servers, new RegExp(`${server.origin.replace(/[.]/g, "\\.")} up`));
            assert.match(notes, /Not reported by the server: .*time to first token/);
            assert.ok(throughputInk > 50, `the throughput chart draws the server's generation rate (${throughputInk} px)`);
            // The Sequences card lists llama-server's two slots, from its /slots.
            assert.deepEqual(sequences, ["free|#0|free", "free|#1|free"]);
            assert.equal(sequencesNote, "0 of 2 slots busy");
        } finally {
            await monitor.stop();
            await manager.dispose();
        }
    });

    test("`watch`: the dashboard and our /metrics (vLLM names) for the watched server, on one port", async () => {
        let metrics = "";
        let page = 0;
        const run = await runCli(["watch", server.origin, "--port", "0", "--interval-ms", "200", "--log-interval", "0"], {
            timeoutMs: 30_000,
            onStdout: (text, child) => {
                const base = /Metrics: (http:\S+)\/metrics/.exec(text)?.[1];
                if (base === undefined || metrics !== "")
                    return;
                metrics = "pending";
                void (async () => {
                    page = (await fetch(/Dashboard: (\S+)/.exec(text)![1]!)).status; // the printed URL, with its access token
                    metrics = await (await fetch(`${base}/metrics`)).text();
                    child.kill("SIGINT");
                })();
            }
        });
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, new RegExp(`${server.origin.replace(/[.]/g, "\\.")}: up \\(llamacpp`));
        assert.equal(page, 200);
        const running = parsePrometheusTextFormat(metrics).find((family) => family.name === "vllm:num_requests_running");
        assert.ok(running !== undefined && running.metrics.length === 1, metrics.slice(0, 500));
        assert.match(metrics, new RegExp(`model_name="${model.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}"`), "named after the watched model");
    });
});

describe("watching two `inference-monitor serve` processes as vLLM replicas", () => {
    const servers: ServeProcess[] = [];

    before(async () => {
        const modelPath = await tinyModelPath();
        for (let i = 0; i < 2; i++)
            servers.push(await startServe(modelPath, ["--parallel", "2", "--threads", "1", "--context-size", "1024", "--log-interval", "3600"]));
    });
    after(async () => {
        await Promise.all(servers.map((server) => server.stop()));
    });

    test("`watch` with both: /metrics has one engine label value per server, each with its own counts", async () => {
        const origins = servers.map((server) => server.baseUrl.replace(/\/v1$/, ""));
        let metrics = "";
        const run = await runCli(["watch", ...origins, "--port", "0", "--interval-ms", "150", "--log-interval", "0"], {
            timeoutMs: 60_000,
            onStdout: onceMetricsUrl(async (url, child) => {
                await Promise.all([[0, 2], [1, 1]].map(async ([i, count]) => {
                    const openai = new OpenAI({baseURL: servers[i!]!.baseUrl, apiKey: "none", maxRetries: 0});
                    for (let k = 0; k < count!; k++)
                        await complete(openai, 12, `watch ${i} ${k}`);
                }));
                await new Promise((resolve) => setTimeout(resolve, 1000)); // a few polls
                metrics = await (await fetch(url)).text();
                child.kill("SIGINT");
            })
        });
        assert.equal(run.code, 0, run.stderr);
        assert.deepEqual(generationByEngine(metrics), {0: 24, 1: 12}, metrics.split("\n").filter((line) => line.startsWith("vllm:generation_tokens_total")).join("\n"));
    });

    test("merged counters equal the sum of each replica's own totals; TTFT estimated from the merged buckets", async () => {
        const origins = servers.map((server) => server.baseUrl.replace(/\/v1$/, ""));
        // Each replica's own counters (they served other tests' requests before): the increase is what counts.
        const ownTotals = async () => await Promise.all(origins.map(async (origin) => {
            const families = parsePrometheusTextFormat(await (await fetch(`${origin}/metrics`)).text());
            const total = (name: string) => families.find((f) => f.name === name)!.metrics.reduce((sum, m) => sum + Number(m.value), 0);
            return {prompt: total("vllm:prompt_tokens_total"), generation: total("vllm:generation_tokens_total"),
                externalQueries: total("vllm:external_prefix_cache_queries_total")};
        }));
        const before = await ownTotals();
        const {monitor, manager, views} = watch(origins.map((url) => ({url})));
        await monitor.pollOnce();
        assert.deepEqual(views.at(-1)!.replicas.map((r) => [r.kind, r.status]), [["vllm", "up"], ["vllm", "up"]]);
        const sent = [3, 2];
        await Promise.all(servers.map((server, i) => {
            const openai = new OpenAI({baseURL: server.baseUrl, apiKey: "none", maxRetries: 0});
            return Promise.all(Array.from({length: sent[i]!}, (_, k) => complete(openai, 12, `Replica ${i} request ${k}`)));
        }));
        await monitor.pollOnce();
        const after = await ownTotals();
        const counters = manager.counters();
        const own = after.map((total, i) => ({generation: total.generation - before[i]!.generation, prompt: total.prompt - before[i]!.prompt,
            externalQueries: total.externalQueries - before[i]!.externalQueries}));
        assert.equal(counters.generationTokens, own[0]!.generation + own[1]!.generation);
        assert.equal(counters.generationTokens, 5 * 12);
        assert.equal(counters.promptTokens, own[0]!.prompt + own[1]!.prompt);
        // Their prompt caches' lookups (vLLM's external prefix cache counters): every request's prompt looked up.
        assert.equal(counters.externalPrefixCacheQueries, own[0]!.externalQueries + own[1]!.externalQueries);
        assert.equal(counters.externalPrefixCacheQueries, counters.promptTokens);
        const view = views.at(-1)!;
        const ttft = view.estimated.ttft;
        assert.ok(ttft !== undefined, "TTFT estimated");
        assert.equal(ttft.count, 5, "every request's TTFT, from both replicas' buckets");
        assert.ok(ttft.p50 !== null && ttft.p50 > 0 && ttft.p99! >= ttft.p50, JSON.stringify(ttft));
        assert.equal(view.estimated.generationTokens?.count, 5);
        assert.ok(!view.notReported.includes("time to first token"));
        assert.ok(view.replicas.every((r) => r.kvCacheUsage !== null), "KV size from vllm:cache_config_info");

        await servers[1]!.stop();
        await monitor.pollOnce();
        assert.deepEqual(views.at(-1)!.replicas.map((r) => r.status), ["up", "unreachable"]);
        assert.notEqual(manager.state, "crashed", "one replica down is not the service down");
        assert.equal(manager.counters().generationTokens, 60, "the merged total keeps what the stopped replica served");
    });

    test("the panel in Chromium: TTFT and ITL marked ≈ from the replicas' buckets, one replica listed unreachable", {skip: chromiumSkipReason()}, async () => {
        const origins = servers.map((server) => server.baseUrl.replace(/\/v1$/, ""));
        const {monitor, manager} = watch(origins.map((url) => ({url})), true);
        await monitor.pollOnce();
        monitor.start();
        try {
            const openai = new OpenAI({baseURL: servers[0]!.baseUrl, apiKey: "none", maxRetries: 0});
            const {tiles, servers: listed, throughputInk, sequences} = await panelAfter(manager,
                async () => void await Promise.all([0, 1, 2].map((i) => complete(openai, 12, `Panel ${i}`))),
                // Every estimated tile: a poll while the requests ran can bring TTFT's buckets before the e2e latency's.
                () => ["median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "median_e2el_ms"]
                    .every((key) => document.querySelector(`[data-metric=${key}]`)?.textContent?.startsWith("≈") === true));
            for (const key of ["median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "median_e2el_ms"]) {
                assert.ok(tiles[key]!.estimated, key);
                assert.match(tiles[key]!.text, /^≈ \d/, key);
            }
            assert.ok(!tiles.output_throughput!.notReported && !tiles.num_requests_running!.notReported);
            assert.match(listed, /unreachable since/, "the replica stopped in the test before");
            assert.ok(throughputInk > 50, `the throughput chart draws the merged generation rate (${throughputInk} px)`);
            assert.deepEqual(sequences, [], "vLLM lists no slots: the Sequences card has none");
        } finally {
            await monitor.stop();
            await manager.dispose();
        }
    });

    test("the dashboard's source picker: all servers merged, or one of them, for each browser on its own", {skip: chromiumSkipReason()}, async () => {
        const origins = servers.map((server) => server.baseUrl.replace(/\/v1$/, ""));
        const merged = watch(origins.map((url) => ({url})), true);
        const single = watch([{url: origins[0]!}], true);
        await Promise.all([merged.monitor.pollOnce(), single.monitor.pollOnce()]);
        merged.monitor.start();
        single.monitor.start();
        const dashboard = await DashboardServer.listen({port: 0, source: merged.manager, webviewDir: webviewDistDir, choices: () => [
            {key: "merged", label: "All 2 servers (merged)", source: merged.manager},
            {key: origins[0]!, label: origins[0]!, source: single.manager}
        ]});
        const browser = await launchChromium();
        try {
            const page = await browser.context.newPage();
            await page.goto(dashboard.url);
            const picker = page.locator("[data-field=source]");
            await picker.waitFor({state: "visible", timeout: 15_000});
            assert.deepEqual(await picker.locator("option").allTextContents(), ["All 2 servers (merged)", origins[0]]);
            // merged: both replicas, the second one stopped by an earlier test
            await page.locator("[data-field=servers]", {hasText: "unreachable since"}).waitFor({state: "visible", timeout: 15_000});
            await picker.selectOption(origins[0]!);
            await page.waitForFunction((origin) => document.querySelector("[data-field=servers]")?.textContent === `${origin} up`, origins[0]!,
                {timeout: 15_000});
            const other = await browser.context.newPage();
            await other.goto(dashboard.url);
            await other.locator("[data-field=servers]", {hasText: "unreachable since"}).waitFor({state: "visible", timeout: 15_000});
            assert.equal(await page.locator("[data-field=servers]").textContent(), `${origins[0]} up`, "each browser keeps its own pick");
        } finally {
            await browser.close();
            await dashboard.close();
            for (const {monitor, manager} of [merged, single]) {
                await monitor.stop();
                await manager.dispose();
            }
        }
    });
});

describe("bad targets", () => {
    let server: http.Server;
    let origin: string;
    let handler: (request: http.IncomingMessage, response: http.ServerResponse) => void = () => undefined;

    before(async () => {
        server = http.createServer((request, response) => handler(request, response));
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => {
        server.close();
    });

    async function statusAfterOnePoll(target: WatchedTarget): Promise<{status: string, error: string | null}> {
        const {monitor, manager, views} = watch([target]);
        await monitor.pollOnce();
        assert.equal(manager.counters().generationTokens, 0);
        const replica = views.at(-1)!.replicas[0]!;
        return {status: replica.status, error: replica.error};
    }

    test("malformed metrics text: an error naming the line, no crash, nothing counted", async () => {
        handler = (_request, response) => response.end("vllm:num_requests_running{engine=\"0\" 3\n");
        const result = await statusAfterOnePoll({url: origin, kind: "vllm"});
        assert.equal(result.status, "error");
        assert.match(result.error ?? "", /\/metrics is not Prometheus text: line 1: expected , or } after label engine/);
    });

    test("401: unauthorized, saying a key is wanted; the key is sent when given", async () => {
        let seen: string | undefined;
        handler = (request, response) => {
            seen = request.headers.authorization;
            response.writeHead(401).end();
        };
        const result = await statusAfterOnePoll({url: origin, kind: "vllm"});
        assert.equal(result.status, "unauthorized");
        assert.match(result.error ?? "", /wants an API key/);
        await statusAfterOnePoll({url: origin, kind: "vllm", apiKey: "sk-test"});
        assert.equal(seen, "Bearer sk-test");
    });

    test("a server that only speaks the OpenAI API: told to use the proxy; a closed port: unreachable", async () => {
        handler = (request, response) => request.url === "/v1/models"
            ? response.end(JSON.stringify({object: "list", data: [{id: "m", object: "model"}]}))
            : response.writeHead(404).end();
        const openaiOnly = await statusAfterOnePoll({url: origin});
        assert.equal(openaiOnly.status, "error");
        assert.match(openaiOnly.error ?? "", /serves \/v1\/models only: watch its traffic with `inference-monitor proxy/);
        const closed = await statusAfterOnePoll({url: `http://127.0.0.1:${await freeLoopbackPort()}`});
        assert.equal(closed.status, "unreachable");
    });

    test("Ollama (its /api/version and /api/ps as documented): told apart, its models' VRAM, and what it does not report", async () => {
        handler = (request, response) => {
            if (request.url === "/api/version")
                response.end(JSON.stringify({version: "0.5.1"}));
            else if (request.url === "/api/ps")
                response.end(JSON.stringify({models: [{name: "mistral:latest", model: "mistral:latest", size: 5137025024, digest: "2ae6f6dd7a3d",
                    details: {format: "gguf", family: "llama", parameter_size: "7.2B", quantization_level: "Q4_0"},
                    expires_at: "2024-06-04T14:38:31.83753-07:00", size_vram: 5137025024}]}));
            else
                response.writeHead(404).end();
        };
        const {monitor, manager, views} = watch([{url: origin}]);
        await monitor.pollOnce();
        const view = views.at(-1)!;
        assert.deepEqual(view.replicas.map((r) => [r.kind, r.status, r.model, r.version, r.vramUsedBytes]),
            [["ollama", "up", "mistral:latest", "0.5.1", 5137025024]]);
        for (const words of ["requests running", "generation tokens", "time to first token", "per-request timeline"])
            assert.ok(view.notReported.includes(words), `${words}: ${view.notReported.join(", ")}`);
        assert.match(view.notes.join("\n"), /100% in VRAM/);
        assert.equal(manager.state, "idle");
    });

    test("`watch` with something that is not a URL is a usage error", async () => {
        const run = await runCli(["watch", "localhost:8080"], {timeoutMs: 20_000});
        assert.equal(run.code, 2);
        assert.match(run.stderr, /"localhost:8080" is not a URL|only http and https/);
    });
});

