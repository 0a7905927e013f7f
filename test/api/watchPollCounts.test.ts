/**
 * How often watched servers are asked (issue G's leftovers), counted by the servers themselves: real
 * local HTTP servers answering like vLLM (the two-rank fixture's /metrics) and like llama.cpp's
 * `llama-server` (/health, /metrics, /slots, and no /v1/models).
 *  - Several servers watched: one poll reads each of them once and feeds the merged view and each
 *    server's own view (TargetMonitor's `targetSinks`, what `watch` and VS Code's ServerWatch use).
 *  - A llama.cpp server without /v1/models is asked for it once, then again only after a minute or
 *    once it is back from being unreachable; not on every poll.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type {AddressInfo} from "node:net";
import path from "node:path";
import {after, describe, test} from "node:test";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {modelIdRetryMs} from "../../extension/host/targets/modelIdLookup.js";
import {TargetMonitor} from "../../extension/host/targets/targetMonitor.js";
import {generationByEngine} from "../helpers/prometheusText.js";
import {onceMetricsUrl, runCli} from "../helpers/runCli.js";


const fixture = fs.readFileSync(path.join(__dirname, "../fixtures/vllm-v1-dp2.metrics.txt"), "utf8");

type Handler = (request: http.IncomingMessage, response: http.ServerResponse) => void;

/** A local server that counts the requests per path before `handle` answers them. */
class CountingServer {
    readonly counts = new Map<string, number>();
    handle: Handler = (_request, response) => void response.writeHead(404).end();
    private readonly server = http.createServer((request, response) => {
        const url = request.url ?? "";
        this.counts.set(url, (this.counts.get(url) ?? 0) + 1);
        this.handle(request, response);
    });

    async listen(): Promise<string> {
        await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
        return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    }

    count(url: string): number {
        return this.counts.get(url) ?? 0;
    }

    async close(): Promise<void> {
        this.server.closeAllConnections();
        await new Promise((resolve) => this.server.close(resolve));
    }
}

/**
 * The fixture (ranks "0" and "1") with rank 0's running requests and each rank's generation tokens set,
 * and `ttfts` more TTFTs of 0.4 s in rank 0's histogram.
 */
function vllmMetrics(running0: number, generation: readonly [number, number], ttfts = 0): string {
    return fixture
        .replace(/^(vllm:time_to_first_token_seconds_(?:bucket\{engine="0",le="(?:0\.5|\+Inf)"|count\{engine="0")[^}]*\}) 10\.0$/gm,
            `$1 ${10 + ttfts}`)
        .replace(/^(vllm:time_to_first_token_seconds_sum\{engine="0"[^}]*\}) 0\.9$/m, `$1 ${0.9 + 0.4 * ttfts}`)
        .replace(/^(vllm:num_requests_running\{engine="0"[^}]*\}) 3\.0$/m, `$1 ${running0}`)
        .replace(/^(vllm:generation_tokens_total\{engine="0"[^}]*\}) 6400\.0$/m, `$1 ${generation[0]}`)
        .replace(/^(vllm:generation_tokens_total\{engine="1"[^}]*\}) 1600\.0$/m, `$1 ${generation[1]}`);
}

/** A vLLM-like server: /metrics from `text()`, anything else 404. */
async function vllmLike(text: () => string): Promise<{server: CountingServer, origin: string}> {
    const server = new CountingServer();
    server.handle = (request, response) => request.url === "/metrics"
        ? void response.writeHead(200, {"Content-Type": "text/plain; version=0.0.4"}).end(text())
        : void response.writeHead(404).end();
    return {server, origin: await server.listen()};
}

const manager = () => new StatsManager({tickIntervalMs: 0});

describe("several servers watched: each read once per poll for the merged view and its own", () => {
    const servers: CountingServer[] = [];
    after(async () => await Promise.all(servers.map(async (server) => await server.close())));

    test("N polls of two two-rank vLLM servers: N /metrics requests each; merged and per-server numbers right", async () => {
        const generations: Array<[number, number]> = [[6400, 1600], [6400, 1600]];
        const ttfts = [0, 0];
        const a = await vllmLike(() => vllmMetrics(3, generations[0]!, ttfts[0]));
        const b = await vllmLike(() => vllmMetrics(5, generations[1]!, ttfts[1]));
        servers.push(a.server, b.server);
        const merged = manager();
        const own = [manager(), manager()];
        const monitor = new TargetMonitor({
            targets: [{url: a.origin, kind: "vllm"}, {url: b.origin, kind: "vllm"}], sink: merged, targetSinks: own, timeoutMs: 3000
        });
        const polls = 6;
        await monitor.pollOnce(); // the baseline
        for (let i = 1; i < polls; i++) {
            generations[0]![0] += 10; // server a, rank 0
            generations[1]![1] += 7; // server b, rank 1
            ttfts[0]! += 1;
            ttfts[1]! += 2;
            await monitor.pollOnce();
        }
        for (const {server} of [a, b])
            assert.deepEqual([...server.counts], [["/metrics", polls]], "one /metrics request per poll, nothing else");
        assert.equal(merged.counters().generationTokens, (polls - 1) * 17);
        assert.deepEqual(own.map((m) => m.counters().generationTokens), [(polls - 1) * 10, (polls - 1) * 7]);
        assert.equal(merged.gauges().running, 3 + 1 + 5 + 1, "both servers' ranks summed");
        assert.deepEqual(own.map((m) => m.gauges().running), [3 + 1, 5 + 1]);
        assert.deepEqual(merged.snapshot().target?.replicas.map((r) => r.name), [`${a.origin}#0`, `${a.origin}#1`, `${b.origin}#0`, `${b.origin}#1`]);
        assert.deepEqual(own.map((m) => m.snapshot().target?.replicas.map((r) => r.name)),
            [[`${a.origin}#0`, `${a.origin}#1`], [`${b.origin}#0`, `${b.origin}#1`]]);
        const ttft = (m: StatsManager) => m.snapshot().target?.estimated.ttft?.count;
        assert.deepEqual(own.map(ttft), [polls - 1, 2 * (polls - 1)], "each server's TTFTs in the window, from its buckets");
        assert.equal(ttft(merged), 3 * (polls - 1), "the merged buckets are both servers' buckets");
        assert.deepEqual(monitor.view(1), own[1]!.snapshot().target, "view(i) is server i's own view");

        await b.server.close();
        await monitor.pollOnce();
        assert.equal(own[1]!.state, "crashed", "server b's own view: down");
        assert.notEqual(merged.state, "crashed", "merged: one server down is not all of them down");
        assert.notEqual(own[0]!.state, "crashed");
        assert.deepEqual(merged.snapshot().target?.replicas.map((r) => r.status), ["up", "up", "unreachable"]);
        assert.equal(merged.counters().generationTokens, (polls - 1) * 17, "the merged total keeps what b served");
        for (const m of [merged, ...own])
            await m.dispose();
    });

    test("`watch` with two servers: each gets one /metrics request per poll (not one for the merged view and one for its own)", async () => {
        // Each answer's generation counters grew since the one before: 10 on server a, 7 on server b.
        const served = [0, 0];
        const servers2 = await Promise.all([10, 7].map(async (step, i) => await vllmLike(() => {
            served[i]! += 1;
            return vllmMetrics(3, [6400 + step * (served[i]! - 1), 1600]);
        })));
        servers.push(...servers2.map(({server}) => server));
        let metrics = "";
        // A poll at start (naming the models) and the first of the interval's; the next one is an hour away.
        const run = await runCli(["watch", ...servers2.map(({origin}) => origin), "--kind", "vllm", "--port", "0",
            "--interval-ms", "3600000", "--log-interval", "0"], {
            timeoutMs: 30_000,
            onStdout: onceMetricsUrl(async (url, child) => {
                // Until the second poll is in our /metrics: both servers' increases.
                for (let tries = 0; tries < 200; tries++) {
                    metrics = await (await fetch(url)).text();
                    if (Object.values(generationByEngine(metrics)).filter((n) => n > 0).length === 2)
                        break;
                    await new Promise((resolve) => setTimeout(resolve, 50));
                }
                child.kill("SIGINT");
            })
        });
        assert.equal(run.code, 0, run.stderr);
        assert.deepEqual(servers2.map(({server}) => [...server.counts]), [[["/metrics", 2]], [["/metrics", 2]]],
            "two polls, each server read once in each");
        assert.deepEqual(generationByEngine(metrics), {0: 10, 1: 7}, "each server's own series: what it served between the two reads");
    });
});


describe("a llama.cpp server without /v1/models", () => {
    const server = new CountingServer();
    let origin = "";
    let models: "404" | "503" | "m" = "404";
    let down = false;
    after(async () => await server.close());

    server.handle = (request, response) => {
        if (down)
            return void request.socket.destroy(); // no answer at all: unreachable
        switch (request.url) {
            case "/health": return void response.end(JSON.stringify({status: "ok"}));
            case "/slots": return void response.end(JSON.stringify([{id: 0, n_ctx: 4096, is_processing: false}]));
            case "/metrics": return void response.end("# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 10\n" +
                "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 20\n" +
                "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n");
            case "/v1/models":
                return void (models === "m" ? response.end(JSON.stringify({object: "list", data: [{id: "m", object: "model"}]}))
                    : response.writeHead(Number(models)).end());
            default: return void response.writeHead(404).end();
        }
    };

    function watchIt(): {monitor: TargetMonitor, poll: (times: number) => Promise<string | null | undefined>, clock: {t: number}} {
        const clock = {t: 1_000_000};
        const monitor = new TargetMonitor({targets: [{url: origin, kind: "llamacpp"}], sink: manager(), timeoutMs: 3000, now: () => clock.t});
        const poll = async (times: number) => {
            for (let i = 0; i < times; i++)
                await monitor.pollOnce();
            return monitor.view().replicas[0]?.model;
        };
        return {monitor, poll, clock};
    }

    test("404: asked once, not every poll; again after a minute, and at once after the server was unreachable", async () => {
        origin = await server.listen();
        models = "404";
        const {monitor, poll, clock} = watchIt();
        assert.equal(await poll(5), null);
        assert.equal(monitor.view().replicas[0]!.status, "up");
        assert.equal(server.count("/metrics"), 5);
        assert.equal(server.count("/v1/models"), 1, "a 404 is remembered");
        clock.t += modelIdRetryMs - 1;
        await poll(2);
        assert.equal(server.count("/v1/models"), 1, "not within the minute");
        clock.t += 1;
        await poll(3);
        assert.equal(server.count("/v1/models"), 2, "once more after the minute, then remembered again");
        down = true;
        await poll(1);
        assert.equal(monitor.view().replicas[0]!.status, "unreachable");
        down = false;
        models = "m";
        assert.equal(await poll(1), "m", "back up: asked at once, and it now names its model");
        assert.equal(server.count("/v1/models"), 3);
        await poll(3);
        assert.equal(server.count("/v1/models"), 3, "a known model is not asked again");
    });

    test("503 (may pass): asked again at the next poll", async () => {
        models = "503";
        const before = server.count("/v1/models");
        const {poll} = watchIt();
        await poll(2);
        assert.equal(server.count("/v1/models") - before, 2);
    });
});
