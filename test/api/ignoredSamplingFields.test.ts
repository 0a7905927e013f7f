/**
 * Sampling fields llama-server honours and node-llama-cpp has no sampler for (`typical_p`, `mirostat`, `top_n_sigma`,
 * `dynatemp_range`): the request is served without them and the server says so once per field (the `serve` log, the
 * VS Code output channel); their neutral values, which clients send by default, say nothing.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer} from "../../extension/host/openai/apiServer.js";
import {tinyModelPath} from "../helpers/testModels.js";

describe("sampling fields served without (typical_p, mirostat, …): said once per field", () => {
    let client: EngineClient;
    let server: ApiServer;
    const notes: string[] = [];
    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 512, parallel: 1, statsIntervalMs: 0, mode: "inProcess"});
        await client.start();
        server = await ApiServer.listen({engine: {current: () => client}, port: 0, onIgnoredField: (message) => notes.push(message)});
    });
    after(async () => {
        await server.close();
        await client.stop();
    });

    async function post(path: string, body: Record<string, unknown>): Promise<number> {
        const response = await fetch(`${server.url}${path.slice(1)}`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({max_tokens: 2, n_predict: 2, ...body})});
        await response.text();
        return response.status;
    }

    test("served; one note per field set to a value that would change the sampling; neutral values say nothing", async () => {
        // What SillyTavern-style clients send by default: all off.
        assert.equal(await post("/completion", {prompt: "Hi", typical_p: 1, mirostat: 0, top_n_sigma: -1, dynatemp_range: 0}), 200);
        assert.deepEqual(notes, []);
        assert.equal(await post("/completion", {prompt: "Hi", typical_p: 0.9}), 200);
        assert.equal(await post("/v1/completions", {prompt: "Hi", typical_p: 0.5, mirostat: 2}), 200);
        assert.equal(await post("/v1/chat/completions", {messages: [{role: "user", content: "Hi"}], mirostat: 1, dynatemp_range: 0.5}), 200);
        assert.equal(await post("/api/generate", {model: "m", prompt: "Hi", stream: false, options: {top_n_sigma: 1.5, num_predict: 2}}), 200);
        assert.equal(notes.length, 4, notes.join("\n"));
        assert.match(notes[0]!, /^typical_p=0\.9 is ignored: node-llama-cpp has no locally typical sampling/);
        assert.match(notes[1]!, /^mirostat=2 is ignored/);
        assert.match(notes[2]!, /^dynatemp_range=0\.5 is ignored/);
        assert.match(notes[3]!, /^top_n_sigma=1\.5 is ignored/, "Ollama's options too");
    });
});
