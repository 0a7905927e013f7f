/**
 * DashboardServer without a browser: the page and its CSP, static files only from webviewDir (no
 * traversal), loopback Host and same-origin checks, the /stream protocol (ready → snapshot, then
 * deltas with consecutive seq at ≤ 4 Hz; pause, snapshot on request, reset, export), malformed and
 * oversized client messages dropped and counted, exports over HTTP, and a port already in use. The
 * access token, backpressure, rate limits, connection cap and timeouts: dashboardGuards.test.ts.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {DashboardServer} from "../../extension/host/dashboard/dashboardServer.js";
import {PortInUseError} from "../../extension/host/net/listen.js";
import {PanelSession} from "../../extension/host/panel/panelSession.js";
import {encodeMessage, ReadyMessage, type HostToPanel} from "../../protocol/panelMessages.js";
import {fakeStats, type FakeStats} from "./statsFixtures.js";
import {connectStream} from "./wsClient.js";

type Reply = {status: number, headers: http.IncomingHttpHeaders, body: string};

function get(port: number, pathname: string, options: {method?: string, host?: string} = {}): Promise<Reply> {
    return new Promise((resolve, reject) => {
        const request = http.request({host: "127.0.0.1", port, path: pathname, method: options.method ?? "GET",
            headers: {host: options.host ?? `127.0.0.1:${port}`}}, (response) => {
            let body = "";
            response.setEncoding("utf8");
            response.on("data", (chunk: string) => body += chunk);
            response.on("end", () => resolve({status: response.statusCode ?? 0, headers: response.headers, body}));
        });
        request.on("error", reject);
        request.end();
    });
}

const ofType = <T extends HostToPanel["type"]>(type: T) => (message: HostToPanel): message is Extract<HostToPanel, {type: T}> => message.type === type;

describe("DashboardServer", () => {
    let stats: FakeStats;
    let server: DashboardServer;
    let root: string;
    let ticker: NodeJS.Timeout;
    /** The page's path with this run's token, as in the URL the server prints. */
    const page = (): string => `/?token=${server.token}`;

    before(async () => {
        root = fs.mkdtempSync(path.join(os.tmpdir(), "dashboard-test-"));
        const webviewDir = path.join(root, "webview");
        fs.mkdirSync(webviewDir);
        fs.writeFileSync(path.join(webviewDir, "panel.js"), "console.log('panel');\n");
        fs.writeFileSync(path.join(webviewDir, "panel.css"), "body{}\n");
        fs.writeFileSync(path.join(root, "secret.txt"), "top secret\n");
        fs.symlinkSync(path.join(root, "secret.txt"), path.join(webviewDir, "link.txt"));
        stats = fakeStats();
        stats.runRequest("warm-up", {cachedTokens: 3});
        // The fake clock advances 300 ms per 50 ms of real time: a sample every ~170 ms, deltas at the 4 Hz cap.
        ticker = setInterval(() => stats.advance(300), 50);
        server = await DashboardServer.listen({port: 0, source: stats.manager, webviewDir});
    });

    after(async () => {
        clearInterval(ticker);
        await server.close();
        fs.rmSync(root, {recursive: true, force: true});
    });

    test("serves the page with a nonce CSP and the WebSocket config", async () => {
        const reply = await get(server.port, page());
        assert.equal(reply.status, 200);
        assert.match(String(reply.headers["content-type"]), /text\/html/);
        const csp = String(reply.headers["content-security-policy"]);
        const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
        assert.ok(nonce !== undefined, csp);
        assert.match(csp, /default-src 'none'/);
        assert.match(csp, new RegExp(`connect-src ws://127\\.0\\.0\\.1:${server.port}/stream`));
        assert.ok(reply.body.includes(`<script nonce="${nonce}" type="application/json" id="config">`));
        assert.ok(reply.body.includes(`"url":"ws://127.0.0.1:${server.port}/stream"`));
        assert.ok(reply.body.includes(`<script nonce="${nonce}" src="/panel.js">`));
        assert.doesNotMatch(reply.body, /unsafe-inline|unsafe-eval/);
        const again = await get(server.port, page());
        assert.notEqual(/'nonce-([^']+)'/.exec(String(again.headers["content-security-policy"]))?.[1], nonce, "a fresh nonce per page");
    });

    test("serves the bundle's files and nothing outside webviewDir", async () => {
        const js = await get(server.port, "/panel.js");
        assert.equal(js.status, 200);
        assert.match(String(js.headers["content-type"]), /javascript/);
        assert.equal((await get(server.port, "/panel.css")).status, 200);
        assert.equal((await get(server.port, "/panel.js", {method: "HEAD"})).status, 200);
        for (const attempt of ["/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/%2e%2e%2fsecret.txt", "/link.txt", "/", "/nope.js", "/%00", "/%zz"]) {
            const reply = await get(server.port, attempt);
            assert.ok(!reply.body.includes("top secret"), `${attempt} leaked the file`);
            if (attempt !== "/")
                assert.ok(reply.status === 404 || reply.status === 400, `${attempt}: ${reply.status}`);
        }
        assert.equal((await get(server.port, "/", {method: "POST"})).status, 405);
    });

    test("answers only to loopback Host names (DNS rebinding)", async () => {
        assert.equal((await get(server.port, page(), {host: `evil.example:${server.port}`})).status, 403);
        assert.equal((await get(server.port, page(), {host: `localhost:${server.port}`})).status, 200);
    });

    test("exports JSON and CSV over HTTP", async () => {
        const json = await get(server.port, `/export.json?token=${server.token}`);
        assert.equal(json.status, 200);
        assert.match(String(json.headers["content-disposition"]), /attachment; filename="inference-monitor-.*\.json"/);
        assert.equal((JSON.parse(json.body) as {counters: {requests: {completed: number}}}).counters.requests.completed, 1);
        const csv = await get(server.port, `/export-requests.csv?token=${server.token}`);
        const lines = csv.body.trim().split("\r\n");
        assert.match(lines[0]!, /^id,client,phase,finished_reason,priority,max_tokens,prompt_tokens,cached_tokens,restored_tokens,generated_tokens,sequence,.*ttft_ms/);
        assert.equal(lines.length, 2);
        assert.match(lines[1]!, /^warm-up,test,finished,length,0,16,8,3,,16,0,/, "restored_tokens empty: an engine without a prompt cache; sequence 0");
        const series = await get(server.port, `/export.csv?token=${server.token}`);
        assert.match(String(series.headers["content-disposition"]), /-timeseries\.csv"/);
        assert.match(series.body.split("\r\n")[0]!, /^time,prompt_tokens_per_s,generation_tokens_per_s,requests_per_s,ttft_p50_ms/);
    });

    test("/stream: ready → snapshot (seq 0), then deltas with consecutive seq at ≤ 4 Hz", async () => {
        const client = await connectStream(server.streamUrl);
        client.sendRaw(encodeMessage(ReadyMessage.create({protocolVersion: 1})));
        const deltas = await client.waitFor(ofType("delta"), 6);
        const first = client.messages[0]!;
        assert.equal(first.type, "snapshot");
        assert.equal(first.type === "snapshot" && first.seq, 0);
        const seqs = deltas.map((message) => message.type === "delta" ? message.delta.seq : -1);
        assert.deepEqual(seqs, seqs.map((_, i) => i + 1));
        const times = client.messages.filter((message) => message.type === "delta").map((message) => message.receivedAt);
        // deltas go out on the manager's (fake) clock; real arrival gaps can only be compressed by batching, so check the fake clock
        const deltaTimes = deltas.map((message) => message.type === "delta" ? message.delta.t : 0);
        for (let i = 1; i < deltaTimes.length; i++)
            assert.ok(deltaTimes[i]! - deltaTimes[i - 1]! >= 249, `deltas ${deltaTimes[i]! - deltaTimes[i - 1]!} ms apart`);
        assert.equal(times.length >= 6, true);
        client.socket.close();
    });

    test("/stream: malformed, binary and oversized messages are dropped and counted; the client keeps its stream", async () => {
        const client = await connectStream(server.streamUrl);
        client.sendRaw(encodeMessage(ReadyMessage.create({protocolVersion: 1})));
        await client.waitFor(ofType("snapshot"));
        const before = server.rejectedCount;
        client.sendRaw("not json");
        client.sendRaw(JSON.stringify({type: "export", format: "pdf"}));
        client.sendRaw(JSON.stringify({type: "launchMissiles"}));
        client.sendRaw(Buffer.from([1, 2, 3]));
        const deltasSoFar = client.messages.filter((message) => message.type === "delta").length;
        await client.waitFor(ofType("delta"), deltasSoFar + 2);
        assert.equal(server.rejectedCount, before + 4);
        assert.equal(client.socket.readyState, client.socket.OPEN);

        client.sendRaw("x".repeat(64 * 1024));
        const {code} = await client.closed;
        assert.equal(code, 1009, "oversized message closes with 1009 (message too big)");
        assert.equal(server.rejectedCount, before + 5);
    });

    test("/stream: refuses browsers from another origin", async () => {
        await assert.rejects(connectStream(server.streamUrl, {origin: "http://evil.example"}), /unexpected response 403/);
        const ok = await connectStream(server.streamUrl, {origin: `http://127.0.0.1:${server.port}`});
        ok.socket.close();
    });

    test("/stream: pause stops deltas, requestSnapshot answers with a snapshot, reset and export", async () => {
        const client = await connectStream(server.streamUrl);
        client.sendRaw(encodeMessage(ReadyMessage.create({protocolVersion: 1})));
        await client.waitFor(ofType("delta"), 1);
        client.sendRaw(JSON.stringify({type: "setPaused", paused: true}));
        await client.waitFor(ofType("paused"));
        const countAtPause = client.messages.length;
        await new Promise((resolve) => setTimeout(resolve, 600));
        assert.equal(client.messages.length, countAtPause, "no deltas while paused");

        client.sendRaw(JSON.stringify({type: "setPaused", paused: false}));
        client.sendRaw(JSON.stringify({type: "requestSnapshot", reason: "resume"}));
        await client.waitFor(ofType("snapshot"), 2);
        // The first delta may arrive together with the snapshot: look right after the snapshot.
        const snapshotAt = client.messages.findLastIndex((message) => message.type === "snapshot");
        await client.waitFor(() => true, snapshotAt + 2);
        const next = client.messages[snapshotAt + 1]!;
        assert.equal(next.type === "delta" && next.delta.seq, 1, "deltas restart at seq 1 after a snapshot");

        client.sendRaw(JSON.stringify({type: "export", format: "csv"}));
        const [exported] = await client.waitFor(ofType("exportResult"));
        assert.ok(exported?.type === "exportResult" && exported.content?.startsWith("time,prompt_tokens_per_s,"));

        client.sendRaw(JSON.stringify({type: "reset"}));
        const [reset] = await client.waitFor((message) => message.type === "delta" && message.delta.reset !== undefined);
        assert.ok(reset?.type === "delta" && reset.delta.reset?.counters.requests.completed === 0);
        client.socket.close();
    });

    test("close() disconnects clients", async () => {
        const scratch = await DashboardServer.listen({port: 0, source: stats.manager, webviewDir: path.join(root, "webview")});
        const client = await connectStream(scratch.streamUrl);
        await scratch.close();
        await client.closed;
        assert.equal(scratch.clientCount, 0);
    });

    test("a port in use is reported as such", async () => {
        const blocker = net.createServer();
        await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", () => resolve()));
        const port = (blocker.address() as net.AddressInfo).port;
        try {
            await assert.rejects(DashboardServer.listen({port, source: stats.manager, webviewDir: path.join(root, "webview")}), (error: unknown) => {
                assert.ok(error instanceof PortInUseError);
                assert.equal(error.port, port);
                assert.equal(error.message, `Dashboard port ${port} on 127.0.0.1 is already in use`);
                return true;
            });
        } finally {
            blocker.close();
        }
    });
});

describe("PanelSession (the VS Code panel's host end: objects in and out)", () => {
    test("ready → snapshot, deltas after a tick, custom export (savedTo), rejects counted, dispose unsubscribes", async () => {
        const stats = fakeStats();
        const sent: HostToPanel[] = [];
        const rejected: string[] = [];
        const session = new PanelSession({
            source: stats.manager, send: (message) => sent.push(message), onRejected: (reason) => rejected.push(reason),
            engineStartedAt: () => 1234,
            exportStats: (format) => Promise.resolve({
                format, fileName: `stats.${format}`, mimeType: "text/plain", savedTo: `/tmp/stats.${format}`
            })
        });
        session.receive({type: "ready", protocolVersion: 1});
        assert.equal(sent[0]?.type, "snapshot");
        assert.equal(sent[0]?.type === "snapshot" && sent[0].engineStartedAt, 1234);
        stats.runRequest("a");
        stats.advance(1000);
        assert.equal(sent[1]?.type === "delta" && sent[1].delta.seq, 1);
        session.receive({type: "export", format: "csv"});
        await new Promise((resolve) => setImmediate(resolve));
        assert.deepEqual(sent[2], {type: "exportResult", format: "csv", fileName: "stats.csv", mimeType: "text/plain", savedTo: "/tmp/stats.csv"});
        session.receive({type: "export", format: "xlsx"});
        session.receive("{");
        assert.equal(session.rejectedCount, 2);
        assert.equal(rejected.length, 2);
        session.dispose();
        assert.equal(stats.manager.subscriberCount, 0);
    });
});
