/**
 * The engine's lean decode loop (engine/leanDecode.ts) against node-llama-cpp's own `evaluateWithMetadata`, on the
 * real stories260K model: the same tokens for the same options (greedy, seeded sampling, penalties whose window moves
 * with the output, DRY, token bans), the same confidences, and the sequence left holding the same tokens. It drives
 * node-llama-cpp internals, so the first test fails if this node-llama-cpp lacks them (the engine would silently fall
 * back to the slower loop).
 *
 * The engine process has one libuv thread, so there the lean loop also queues each sample right behind its decode
 * (engine/sampleAhead.ts). This file runs in the test runner's process (libuv's default pool: no sampling ahead) and
 * runs itself again in a child with UV_THREADPOOL_SIZE=1, where every lean token must have been sampled ahead.
 */
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {after, before, describe, test} from "node:test";
import {generateTokens, leanInternals, type GeneratedToken} from "../../engine/leanDecode.js";
import type {LlamaContextSequence, SequenceEvaluateOptions, Token} from "../../engine/llamaTypes.js";
import {loadModel, type LoadedModel} from "../../engine/modelLoader.js";
import {sampleAheadOf, type SampleAhead} from "../../engine/sampleAhead.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();
const suite = "lean decode loop (stories260K)";
const count = 48;
const onePoolThread = process.env.UV_THREADPOOL_SIZE?.trim() === "1";

async function take(tokens: AsyncGenerator<GeneratedToken, void, undefined>, n: number): Promise<GeneratedToken[]> {
    const out: GeneratedToken[] = [];
    for await (const output of tokens) {
        out.push(output);
        if (out.length >= n)
            break;
    }
    return out;
}

describe(suite, {skip: skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    let loaded: LoadedModel;
    let lean: LlamaContextSequence;
    let reference: LlamaContextSequence;
    let prompt: Token[];
    let ahead: SampleAhead | undefined;
    /** Samples queued ahead while `run` ran. */
    const queuedAheadDuring = async <T>(run: () => Promise<T>): Promise<[T, number]> => {
        const before = ahead?.queuedAhead ?? 0;
        const result = await run();
        return [result, (ahead?.queuedAhead ?? 0) - before];
    };

    before(async () => {
        loaded = await loadModel({modelPath: stories.path!, threads: 1, parallel: 2, contextSize: 512, gpu: "off"}, () => undefined);
        lean = loaded.context.getSequence();
        reference = loaded.context.getSequence();
        prompt = loaded.model.tokenize("Once upon a time, there was a little girl named Lily. She", true);
        ahead = sampleAheadOf((loaded.context as unknown as {_ctx: object})._ctx);
    });
    after(async () => {
        await loaded.context.dispose();
        await loaded.model.dispose();
        await loaded.llama.dispose();
    });

    test("this node-llama-cpp has the internals the lean loop drives", () => {
        assert.ok(leanInternals(lean) !== undefined, "node-llama-cpp's sequence internals changed: the engine would use its slower loop");
    });

    test(`samples are queued ahead ${onePoolThread ? "with one libuv thread" : "only with one libuv thread: not here"}`, () => {
        assert.equal(ahead !== undefined, onePoolThread);
    });

    /** Options built per side: penalties read the side's own output. */
    const cases: Array<{name: string, options: (generated: Token[]) => SequenceEvaluateOptions, confidence?: true, readsOutput?: true}> = [
        {name: "greedy", options: () => ({temperature: 0})},
        {name: "seeded sampling", options: () => ({temperature: 0.9, seed: 11, topK: 30, topP: 0.9, minP: 0.02})},
        {name: "confidence", options: () => ({temperature: 0.8, seed: 5}), confidence: true},
        {name: "a penalty window that moves with the output", options: (generated) => ({temperature: 0.8, seed: 3, repeatPenalty: {
            punishTokens: () => generated.slice(-16), maxPunishTokens: 16, penalty: 1.4, presencePenalty: 0.3, frequencyPenalty: 0.2}}), readsOutput: true},
        {name: "DRY", options: () => ({temperature: 0.7, seed: 9, dryRepeatPenalty: {strength: 0.8, base: 1.75, allowedLength: 2, lastTokens: 64}})},
        {name: "bans that change with the output", options: (generated) => ({temperature: 0.8, seed: 2, tokenBias: () => {
            const bias = new loaded.TokenBias(loaded.model.tokenizer);
            for (const token of loaded.model.tokenize(generated.length < 20 ? " the." : " she", false))
                bias.set(token, "never");
            return bias;
        }}), readsOutput: true}
    ];

    // Decoding ahead asked for on every token: taken where no option reads the output per token (it has not seen the token yet).
    for (const {name, options, confidence, readsOutput} of cases)
        for (const askAhead of [false, true]) {
            const decodeAhead = askAhead && readsOutput !== true;
            test(`${name}${askAhead ? `, decoding ahead asked for${decodeAhead ? "" : " (not taken: the options read the output)"}` : ""}: ` +
            `the tokens node-llama-cpp's loop gives, and the sequence holds the same${decodeAhead ? " and one more" : ""}`, async () => {
                const sides = [];
                // One side at a time: each decodes alone, so both see the same batches.
                for (const [sequence, loop] of [[lean, "lean"], [reference, "node-llama-cpp"]] as const) {
                    await sequence.clearHistory();
                    const generated: Token[] = [];
                    const metadata = confidence === true ? {confidence: true as const} : {};
                    const tokens = loop === "lean"
                        ? generateTokens(sequence, prompt, metadata, options(generated), () => askAhead)
                        : sequence.evaluateWithMetadata(prompt, metadata, {...options(generated), yieldEogToken: true}) as
                        AsyncGenerator<GeneratedToken, void, undefined>;
                    const [outputs, sampledAhead] = await queuedAheadDuring(async () => {
                        const outputs: GeneratedToken[] = [];
                        for await (const output of tokens) {
                            outputs.push(output);
                            generated.push(output.token);
                            if (outputs.length >= count)
                                break;
                        }
                        return outputs;
                    });
                    assert.equal(sampledAhead, loop === "lean" && onePoolThread ? count + (decodeAhead ? 1 : 0) : 0, `${loop}: tokens sampled ahead`);
                    sides.push({outputs, held: [...sequence.contextTokens]});
                }
                const [ours, theirs] = sides as [typeof sides[0], typeof sides[0]];
                assert.deepEqual(ours.outputs.map((o) => o.token), theirs.outputs.map((o) => o.token));
                if (confidence === true) {
                    assert.equal(ours.outputs.filter((o) => typeof o.confidence === "number").length, count, "a token without its confidence");
                    ours.outputs.forEach((o, i) => assert.ok(Math.abs(o.confidence! - theirs.outputs[i]!.confidence!) < 1e-6, `token ${i}'s confidence`));
                } else
                    assert.ok(ours.outputs.every((o) => o.confidence === undefined));
                // The prompt and every token but the last (fed back only when the next is asked for), unless it was decoded ahead.
                assert.equal(ours.held.length, prompt.length + count - (decodeAhead ? 0 : 1));
                assert.deepEqual(ours.held.slice(0, theirs.held.length), theirs.held);
                assert.equal(lean.nextTokenIndex, reference.nextTokenIndex + (decodeAhead ? 1 : 0));
            });
        }

    test("two loops decoding in the same batches: each gets the tokens it gets alone", async () => {
        const prompts = [prompt, loaded.model.tokenize("The dog ran to the park and", true)];
        const sequences = [lean, reference];
        const run = (i: number): Promise<GeneratedToken[]> => take(generateTokens(sequences[i]!, prompts[i]!, {}, {temperature: 0}), 24);
        const alone: GeneratedToken[][] = [];
        for (const i of [0, 1]) {
            await sequences[i]!.clearHistory();
            alone.push(await run(i));
        }
        for (const sequence of sequences)
            await sequence.clearHistory();
        const [together, sampledAhead] = await queuedAheadDuring(() => Promise.all([run(0), run(1)]));
        assert.notDeepEqual(alone[0]!.map((o) => o.token), alone[1]!.map((o) => o.token), "the prompts must lead apart");
        assert.deepEqual(together.map((tokens) => tokens.map((o) => o.token)), alone.map((tokens) => tokens.map((o) => o.token)));
        assert.equal(sampledAhead, onePoolThread ? 48 : 0);
    });

    test("a token decoded ahead is on its way before the caller has it, and only where the caller says so", async () => {
        await lean.clearHistory();
        // Counts the native decodes by shadowing the addon's method on this context, as sampleAhead.ts does.
        const native = (loaded.context as unknown as {_ctx: {decodeBatch: (...args: unknown[]) => unknown}})._ctx;
        const own = Object.getOwnPropertyDescriptor(native, "decodeBatch");
        const decodeBatch = native.decodeBatch;
        let decodes = 0;
        Object.defineProperty(native, "decodeBatch", {configurable: true, value: (...args: unknown[]) => {
            decodes++;
            return decodeBatch.apply(native, args);
        }});
        const decodedAhead: boolean[] = [];
        const generated: Token[] = [];
        try {
            for await (const output of generateTokens(lean, prompt, {}, {temperature: 0}, () => generated.length % 2 === 0)) {
                generated.push(output.token);
                // The prompt's decode, one per token fed back so far, and this token's if it went ahead.
                decodedAhead.push(decodes === generated.length + 1);
                if (generated.length >= 12)
                    break;
            }
        } finally {
            if (own !== undefined)
                Object.defineProperty(native, "decodeBatch", own);
            else
                delete (native as {decodeBatch?: unknown}).decodeBatch;
        }
        assert.deepEqual(decodedAhead, decodedAhead.map((_, i) => i % 2 === 0));
        assert.equal(lean.nextTokenIndex, prompt.length + 12 - 1, "the last token was not to be decoded");
    });

    test("the whole distribution asked for: node-llama-cpp's loop gives it", async () => {
        await lean.clearHistory();
        const outputs = await take(generateTokens(lean, prompt, {probabilities: true}, {temperature: 0.8, seed: 1}), 3);
        assert.equal(outputs.length, 3);
        for (const output of outputs) {
            assert.ok(output.probabilities instanceof Map && output.probabilities.size > 1, "no distribution");
            assert.ok(output.probabilities.has(output.token));
        }
    });

    test("a second generation continues the sequence where the first stopped", async () => {
        await lean.clearHistory();
        const first = await take(generateTokens(lean, prompt, {}, {temperature: 0}), 5);
        const last = first.at(-1)!.token;
        const second = await take(generateTokens(lean, [last], {}, {temperature: 0}), 5);
        await reference.clearHistory();
        const whole = await take(reference.evaluateWithMetadata(prompt, {}, {temperature: 0, yieldEogToken: true}) as
            AsyncGenerator<GeneratedToken, void, undefined>, 10);
        assert.deepEqual([...first, ...second].map((o) => o.token), whole.map((o) => o.token));
    });
});

if (!onePoolThread)
    test("lean decode loop with one libuv thread, as in the engine process: this file's tests pass, sampled ahead", {
        skip: skipReason(suite, stories.missing === undefined ? [] : [stories.missing])
    }, () => {
        const env: NodeJS.ProcessEnv = {...process.env, UV_THREADPOOL_SIZE: "1"};
        delete env.NODE_TEST_CONTEXT; // a test run of its own, not a part of this one
        const child = spawnSync(process.execPath, ["--import", "tsx", "--test", "test/engine/leanDecode.test.ts"], {env, encoding: "utf8"});
        assert.equal(child.status, 0, `the run with one libuv thread failed:\n${(child.stdout + child.stderr).slice(-6000)}`);
        assert.match(child.stdout, /# pass [1-9]/);
        assert.match(child.stdout, /# fail 0/);
    });
