/**
 * Bad input and failure: the host never crashes, every request ends with a reason, and errors say
 * what went wrong. Real engine, real generated model.
 */
import assert from "node:assert/strict";
import {fork} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {pathToFileURL} from "node:url";
import {after, before, describe, test} from "node:test";
import WebSocket from "ws";
import {bundledEntryPath} from "../../engine/bundlePaths.js";
import {engineOptionsEnv} from "../../protocol/engineOptionsTransfer.js";
import {parseEngineToHost, type EngineToHost} from "../../protocol/engineMessages.js";
import {statsSecretHeader} from "../../protocol/statsChannel.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {EngineClient, EngineLoadError, type EngineMode} from "../../extension/host/engineClient/engineClient.js";
import {demoModelGgufSpec} from "../../engine/model/demoModel.js";
import {writeGguf, type GgufMetadataValue} from "../../engine/model/ggufWriter.js";
import {tinyModelPath} from "../helpers/testModels.js";

const prompt = "Once upon a time";

function tempDir(): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), "im-bad-"));
}

/** Bad model files, each with the message the user should see. */
async function badModelFiles(): Promise<Array<{label: string, file: string, message: RegExp}>> {
    const dir = tempDir();
    const valid = fs.readFileSync(await tinyModelPath());
    const empty = path.join(dir, "empty.gguf");
    fs.writeFileSync(empty, "");
    const text = path.join(dir, "notes.gguf");
    fs.writeFileSync(text, "this is not a model\n".repeat(100));
    const truncated = path.join(dir, "truncated.gguf");
    fs.writeFileSync(truncated, valid.subarray(0, Math.floor(valid.length / 2)));
    const headerCut = path.join(dir, "header-cut.gguf");
    fs.writeFileSync(headerCut, valid.subarray(0, 200));
    return [
        {label: "missing path", file: path.join(dir, "nope.gguf"), message: /not found/i},
        {label: "a directory", file: dir, message: /directory/i},
        {label: "an empty file", file: empty, message: /empty/i},
        {label: "a non-GGUF file", file: text, message: /not a GGUF/i},
        {label: "a truncated GGUF", file: truncated, message: /truncated/i},
        {label: "a GGUF cut inside its header", file: headerCut, message: /truncated|metadata/i}
    ];
}

for (const mode of ["process", "inProcess"] as EngineMode[]) {
    describe(`bad model files (${mode})`, () => {
        test("each is refused with a clear error before llama.cpp sees it, and the host lives on", async () => {
            for (const bad of await badModelFiles()) {
                const client = new EngineClient({mode, modelPath: bad.file, statsIntervalMs: 0});
                await assert.rejects(client.start(), (error: unknown) => {
                    assert.ok(error instanceof EngineLoadError, `${bad.label}: ${String(error)}`);
                    assert.match(error.message, bad.message, bad.label);
                    return true;
                });
                assert.equal(client.state, "stopped");
                const late = await client.generate({prompt, maxTokens: 2}).done;
                assert.equal(late.reason, "error");
                assert.match(late.error!, /not running/);
            }
        });
    });
}

/**
 * An engine entry that hands the file to llama.cpp without any validation: a stand-in for a file
 * the validator does not know to be fatal.
 */
function unvalidatedEngineEntry(): string {
    const entry = path.join(tempDir(), "unvalidatedEngine.mjs");
    const nodeLlamaCpp = pathToFileURL(path.resolve("node_modules/node-llama-cpp/dist/index.js")).href;
    fs.writeFileSync(entry, [
        `import {getLlama} from ${JSON.stringify(nodeLlamaCpp)};`,
        `const {modelPath} = JSON.parse(process.env[${JSON.stringify(engineOptionsEnv)}]);`,
        "const llama = await getLlama({gpu: false, build: \"never\"});",
        "await llama.loadModel({modelPath});",
        "process.send({type: \"loadFailed\", error: {name: \"Error\", message: \"loaded without crashing\"}});"
    ].join("\n"));
    return entry;
}

async function writeModel(file: string, set: Record<string, GgufMetadataValue>): Promise<string> {
    const spec = demoModelGgufSpec({size: "tiny", seed: 0});
    const handle = await fs.promises.open(file, "w");
    try {
        await writeGguf(handle, spec.metadata.map((entry) => entry.key in set ? {key: entry.key, value: set[entry.key]!} : entry), spec.tensors);
    } finally {
        await handle.close();
    }
    return file;
}

describe("in-process engine: a file loads in a check process first", () => {
    test("a file that aborts llama.cpp gives a clear error, and the host lives on", async () => {
        const file = await writeModel(path.join(tempDir(), "bert.gguf"), {"tokenizer.ggml.model": {type: "string", value: "bert"}});
        const client = new EngineClient({mode: "inProcess", modelPath: file, engineEntryFile: unvalidatedEngineEntry(), statsIntervalMs: 0});
        await assert.rejects(client.start(), (error: unknown) => {
            assert.ok(error instanceof EngineLoadError, String(error));
            assert.match(error.message, /^the model crashed llama\.cpp in a check process: signal SIGABRT\n/);
            assert.match(error.message, /llama-vocab\.cpp.*fatal error/, "the end of its stderr");
            return true;
        });
        assert.equal(client.state, "stopped");
    });

    test("a file that loaded once is not checked again this session, until it changes", async () => {
        const file = path.join(tempDir(), "tiny.gguf");
        fs.copyFileSync(await tinyModelPath(), file);
        const options = {mode: "inProcess", modelPath: file, threads: 1, statsIntervalMs: 0} as const;
        const first = new EngineClient(options);
        await first.start();
        await first.stop();
        // A check now would fail: its entry file does not exist.
        const missingEntry = path.join(tempDir(), "no-such-engine.js");
        const second = new EngineClient({...options, engineEntryFile: missingEntry});
        assert.equal((await second.start()).model.path, file);
        await second.stop();
        const later = new Date(Date.now() + 5000);
        fs.utimesSync(file, later, later);
        const third = new EngineClient({...options, engineEntryFile: missingEntry});
        await assert.rejects(third.start(), /the model crashed llama\.cpp in a check process: exit code 1/);
    });
});

describe("engine process: malformed IPC messages", () => {
    test("unknown types, bad shapes and bad batch frames are rejected with a reason; the engine keeps serving", async () => {
        const child = fork(bundledEntryPath("engineMain.js"), [], {
            env: {...process.env, [engineOptionsEnv]: JSON.stringify({modelPath: await tinyModelPath(), statsIntervalMs: 0, threads: 1})},
            stdio: ["ignore", "ignore", "pipe", "ipc"]
        });
        const messages: EngineToHost[] = [];
        const waitFor = (predicate: (m: EngineToHost) => boolean) => new Promise<EngineToHost>((resolve) => {
            const existing = messages.find(predicate);
            if (existing !== undefined) return resolve(existing);
            const onMessage = (raw: unknown) => {
                const message = parseEngineToHost(raw);
                if (predicate(message)) {
                    child.off("message", onMessage);
                    resolve(message);
                }
            };
            child.on("message", onMessage);
        });
        child.on("message", (raw) => messages.push(parseEngineToHost(raw)));
        try {
            await waitFor((m) => m.type === "ready");
            const bad: unknown[] = [
                {type: "launchMissiles"},
                "just a string",
                {type: "generate", request: {id: "x", prompt: 42, maxTokens: 3}},
                {type: "generate", request: {id: "y", prompt: "a", messages: [], maxTokens: 3}},
                {type: "generate", request: {id: "z", prompt: "a", maxTokens: 2.5}},
                {type: "cancel"},
                {type: "ping", seq: "one", hostTime: 1},
                {type: "batch"},
                {type: "batch", messages: [{type: "batch", messages: []}]}
            ];
            for (const message of bad)
                child.send(message as object);
            // A batch frame: its bad message is refused alone, the good one served.
            child.send({type: "batch", messages: [{type: "cancel", id: 7}, {type: "generate", request: {id: "good", prompt, maxTokens: 3, ignoreEos: true}}]});
            const finished = await waitFor((m) => m.type === "outputs" && m.events.some((e) => e.kind === "finished" && e.id === "good"));
            assert.equal(finished.type, "outputs");
            const rejected = messages.filter((m): m is Extract<EngineToHost, {type: "rejected"}> => m.type === "rejected");
            assert.equal(rejected.length, bad.length + 1);
            assert.match(rejected[7]!.reason, /batch\.messages: expected an array/);
            assert.match(rejected[8]!.reason, /a batch cannot contain a batch/);
            assert.match(rejected[9]!.reason, /cancel\.id: expected a string/);
            assert.match(rejected[0]!.reason, /unknown message type "launchMissiles"/);
            assert.match(rejected[2]!.reason, /prompt: expected a string/);
            assert.match(rejected[3]!.reason, /exactly one of prompt, promptTokens and messages/);
            assert.match(rejected[4]!.reason, /maxTokens: expected an integer/);
        } finally {
            child.kill("SIGKILL");
        }
    });
});

describe("stats channel: malformed and oversized frames", () => {
    let client: EngineClient;
    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, statsIntervalMs: 200});
        await client.start();
    });
    after(async () => {
        await client.stop();
    });

    test("are dropped and counted; snapshots keep flowing", async () => {
        const secret = (client as unknown as {statsServer: {secret: string}}).statsServer.secret;
        const ws = new WebSocket(client.statsUrl!, {headers: {[statsSecretHeader]: secret}});
        await new Promise((resolve) => ws.on("open", resolve));
        const before = client.statsRejectedCount;
        ws.send("{not json");
        ws.send(JSON.stringify({type: "snapshot", seq: "x"}));
        ws.send(JSON.stringify({type: "explode"}));
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.equal(client.statsRejectedCount, before + 3);
        const closed = new Promise<number>((resolve) => ws.on("close", (code) => resolve(code)));
        ws.send("x".repeat(64 * 1024));
        assert.equal(await closed, 1009, "oversized frame closes that connection (message too big)");
        assert.ok(client.statsRejectedCount >= before + 4);
        const next = await new Promise((resolve) => {
            const unobserve = client.observe({onStatsSnapshot: (snapshot) => {
                unobserve();
                resolve(snapshot);
            }});
        });
        assert.ok(next, "the engine's own snapshots still arrive");
    });
});

describe("engine process killed mid-stream", () => {
    test("every in-flight request ends as failed within 1 s, then restart serves again", async () => {
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, parallel: 2, statsIntervalMs: 0});
        const manager = new StatsManager({tickIntervalMs: 0});
        client.observe(manager);
        await client.start();
        try {
            const running = [client.generate({prompt, maxTokens: 2000, ignoreEos: true}), client.generate({prompt, maxTokens: 2000, ignoreEos: true})];
            const queued = client.generate({prompt, maxTokens: 5});
            await new Promise<void>((resolve) => running[0]!.onChunk(() => resolve()));
            const killedAt = Date.now();
            process.kill(client.info!.pid, "SIGKILL");
            const results = await Promise.all([...running, queued].map((h) => h.done));
            const took = Date.now() - killedAt;
            assert.ok(took < 1000, `ended within 1 s (${took} ms)`);
            for (const result of results) {
                assert.equal(result.reason, "error");
                assert.match(result.error!, /engine exited \(signal SIGKILL\)/);
            }
            assert.equal(client.state, "crashed");
            const ledger = manager.counters().requests;
            assert.equal(ledger.arrived, 3);
            assert.equal(ledger.byReason.error, 3);
            assert.equal(ledger.inFlight, 0);
            assert.equal(manager.state, "crashed");

            await client.restart();
            const again = await client.generate({prompt, maxTokens: 4, ignoreEos: true}).done;
            assert.equal(again.generatedTokens, 4);
            assert.equal(manager.counters().requests.arrived, 4);
            assert.equal(manager.counters().requests.completed, 1);
        } finally {
            await client.stop();
        }
    });
});
