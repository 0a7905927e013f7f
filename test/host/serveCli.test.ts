/**
 * `inference-monitor serve` as a user runs it: the printed base URL works with the official client,
 * `/metrics`, `/health` and the dashboard answer on the same port, Ctrl-C stops it cleanly; a busy
 * port and a network bind without a key are clear errors.
 */
import assert from "node:assert/strict";
import os from "node:os";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {busyPort, runCli} from "../helpers/runCli.js";
import {tinyModelPath} from "../helpers/testModels.js";

describe("inference-monitor serve", () => {
    test("serves the API, /metrics, /health and the dashboard on one port until SIGINT", async () => {
        let checked: Promise<void> | undefined;
        let failure: Error | undefined;
        const run = await runCli(["serve", "--model", await tinyModelPath(), "--port", "0", "--threads", "1", "--context-size", "512", "--parallel", "2",
            "--prefill-chunk", "40"], {
            onStdout: (text, child) => {
                if (checked !== undefined || !text.includes("Ready:"))
                    return;
                const baseUrl = /OpenAI-compatible API: (http:\S+\/v1)/.exec(text)![1]!;
                checked = (async () => {
                    const openai = new OpenAI({baseURL: baseUrl, apiKey: "none", maxRetries: 0});
                    const [model] = (await openai.models.list()).data;
                    const completion = await openai.chat.completions.create({model: model!.id, messages: [{role: "user", content: "Hi"}], max_tokens: 5,
                        ...({ignore_eos: true} as Record<string, unknown>)});
                    assert.equal(completion.usage?.completion_tokens, 5);
                    const root = baseUrl.replace(/v1$/, "");
                    const metrics = await (await fetch(`${root}metrics`)).text();
                    assert.match(metrics, /vllm:generation_tokens_total\{[^}]*\} 5\n/);
                    assert.equal((await fetch(`${root}health`)).status, 200);
                    const page = await fetch(/Dashboard: (\S+)/.exec(text)![1]!); // the printed URL, with its access token
                    assert.equal(page.status, 200);
                    assert.match(await page.text(), /<html/);
                })().catch((error: unknown) => {
                    failure = error instanceof Error ? error : new Error(String(error));
                }).finally(() => child.kill("SIGINT"));
            },
            timeoutMs: 120_000
        });
        await checked;
        if (failure !== undefined)
            throw failure;
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /OpenAI-compatible API: http:\/\/127\.0\.0\.1:\d+\/v1\n/);
        assert.match(run.stdout, /Stopping/);
        assert.match(run.stdout, /^Ready: .*, 2 sequences, 1 thread, .*, prefill chunk 40 tokens\. Ctrl-C stops\.$/m);
        // V8's optimizing compilers go off in serve's own process where they go off in the engine's (cores < threads + 3).
        const compilersOff = /^note: V8's optimizing compilers are off in this process and the engine's \(\d+ cores? for 1 compute thread\)/m;
        assert.equal(compilersOff.test(run.stderr), os.availableParallelism() < 1 + 3, run.stderr);
    });

    test("a port in use is a clear error naming the flag, exit 1; a network bind without a key is refused", async () => {
        const busy = await busyPort();
        try {
            const run = await runCli(["serve", "--port", String(busy.port)]);
            assert.equal(run.code, 1);
            assert.match(run.stderr, new RegExp(`${busy.port}.*in use.*--port`));
        } finally {
            busy.close();
        }
        const exposed = await runCli(["serve", "--host", "0.0.0.0", "--port", "0"], {timeoutMs: 30_000});
        assert.equal(exposed.code, 1);
        assert.match(exposed.stderr, /API key/);
        const usage = await runCli(["serve", "--max-waiting", "-1"]);
        assert.equal(usage.code, 2);
        assert.match(usage.stderr, /--max-waiting/);
    });
});
