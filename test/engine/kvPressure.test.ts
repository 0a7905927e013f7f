/**
 * KV cache under pressure, on the real engine process: a prompt of exactly one sequence's context minus
 * `maxTokens` is admitted and runs to its end, one token more is refused naming both numbers; more
 * near-full requests than sequences wait and are all served; and the KV gauge the panel shows is read
 * against what the requests hold (prompt + evaluated tokens over every sequence's cells).
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import type {EngineStep} from "../../extension/host/engineClient/engineStep.js";
import {StatsManager} from "../../extension/host/stats/statsManager.js";
import {tinyModelPath} from "../helpers/testModels.js";

const contextSize = 256;
const parallel = 2;
const maxTokens = 16;
const greedy = {temperature: 0, maxTokens, ignoreEos: true} as const;

describe("KV cache pressure (engine process)", () => {
    let client: EngineClient;
    const steps: EngineStep[] = [];
    const manager = new StatsManager({tickIntervalMs: 0});
    /** `unit` repeated `n` times: a prompt whose token count grows by exactly one per unit (checked below). */
    const unit = " the";
    const promptOf = (n: number) => `Once${unit.repeat(n)}`;
    let tokensPerPrompt: (n: number) => number = () => Number.NaN;

    /** The prompt token count the engine reports for `prompt` (a refused request still reports it). */
    async function promptTokens(prompt: string): Promise<number> {
        const result = await client.generate({prompt, temperature: 0, maxTokens: 100_000}).done;
        assert.equal(result.reason, "error");
        return result.promptTokens;
    }

    before(async () => {
        client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize, parallel, statsIntervalMs: 0});
        await client.start();
        client.observe({onOutputs: (step) => steps.push(step)});
        client.observe(manager);
        // Calibrate the prompt: two sizes give the fixed part, a third proves each unit is one token.
        const [a, b, c] = [await promptTokens(promptOf(10)), await promptTokens(promptOf(20)), await promptTokens(promptOf(200))];
        assert.equal(b - a, 10, `"${unit}" is not one token per repeat: ${a} tokens for 10, ${b} for 20`);
        tokensPerPrompt = (n) => a + (n - 10);
        assert.equal(c, tokensPerPrompt(200));
    });
    after(async () => {
        await client.stop();
        await manager.dispose();
    });

    test("context − maxTokens prompt tokens are admitted and run to the end; one more is refused with both numbers", async () => {
        const fits = contextSize - maxTokens;
        const n = fits - tokensPerPrompt(0);
        const admitted = await client.generate({prompt: promptOf(n), ...greedy}).done;
        assert.equal(admitted.promptTokens, fits);
        assert.equal(admitted.reason, "length", admitted.error);
        assert.equal(admitted.generatedTokens, maxTokens);

        const refused = await client.generate({prompt: promptOf(n + 1), ...greedy}).done;
        assert.equal(refused.reason, "error");
        assert.equal(refused.errorCode, "context_length_exceeded");
        assert.match(refused.error!, new RegExp(`holds ${contextSize} tokens, but the request needs ${contextSize + 1} ` +
            `\\(${fits + 1} in the prompt, ${maxTokens} to generate\\)`));
        assert.equal(refused.generatedTokens, 0);
    });

    test("more near-full requests than sequences wait for one and are all served, never over capacity", async () => {
        const before = steps.length;
        const n = contextSize - maxTokens - tokensPerPrompt(0) - 4;
        const results = await Promise.all(Array.from({length: 3 * parallel}, (_, i) =>
            client.generate({prompt: `${promptOf(n)}${" a".repeat(i % 3)}`, ...greedy}).done));
        for (const result of results) {
            assert.equal(result.reason, "length", result.error);
            assert.equal(result.generatedTokens, maxTokens);
        }
        const scheduler = steps.slice(before).flatMap((step) => step.scheduler !== undefined ? [step.scheduler] : []);
        assert.ok(scheduler.some((s) => s.waiting > 0), "some requests waited for a free sequence");
        assert.ok(scheduler.every((s) => s.running <= parallel), "never more running than sequences");
        assert.ok(scheduler.every((s) => s.kvUsedTokens <= s.kvCapacityTokens), "never more KV in use than cells");
        assert.ok(scheduler.some((s) => s.kvUsedTokens > contextSize), "both sequences nearly full at once");
    });

    test("the KV gauge reads the tokens a request holds over all sequences' cells, and drops to 0 when it ends", async () => {
        const before = steps.length;
        const n = 100;
        const gaugesDuring: number[] = [];
        const observer = client.observe({onOutputs: (step) => {
            if (step.scheduler !== undefined && step.scheduler.running > 0)
                gaugesDuring.push(manager.gauges().kvCacheUsage);
        }});
        const result = await client.generate({prompt: promptOf(n), ...greedy}).done;
        observer();
        assert.equal(result.reason, "length");
        const prompt = tokensPerPrompt(n);
        assert.equal(result.promptTokens, prompt);
        const scheduler = steps.slice(before).flatMap((step) => step.scheduler !== undefined ? [step.scheduler] : []);
        for (const s of scheduler)
            assert.equal(s.kvCapacityTokens, contextSize * parallel);
        const held = scheduler.filter((s) => s.running > 0).map((s) => s.kvUsedTokens);
        assert.ok(held.every((tokens, i) => tokens > 0 && (i === 0 || tokens >= held[i - 1]!)), `KV in use while running: ${held.join(", ")}`);
        const busiest = Math.max(...held);
        // While it runs the sequence holds the prompt and the generated tokens evaluated so far: the last
        // token is sampled, never evaluated, and the step evaluating the one before it ends the request.
        assert.equal(busiest, prompt + maxTokens - 2);
        assert.ok(Math.abs(Math.max(...gaugesDuring) - busiest / (contextSize * parallel)) < 1e-9,
            `gauge ${Math.max(...gaugesDuring)} vs ${busiest}/${contextSize * parallel}`);
        assert.equal(scheduler.at(-1)!.kvUsedTokens, 0, "a finished request's cells no longer count as used");
        assert.equal(manager.gauges().kvCacheUsage, 0);
    });
});
