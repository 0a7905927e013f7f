/**
 * The engine's lean decode loop (engine/leanDecode.ts) against node-llama-cpp's own `evaluateWithMetadata`, on the
 * real stories260K model: the same tokens for the same options (greedy, seeded sampling, penalties whose window moves
 * with the output, DRY, token bans), the same confidences, and the sequence left holding the same tokens. It drives
 * node-llama-cpp internals, so the first test fails if this node-llama-cpp lacks them (the engine would silently fall
 * back to the slower loop).
 *
 * The engine process has one libuv thread, so there the lean loop also queues each sample right behind its decode
 * (engine/sampleAhead.ts). This file runs in the test runner's process (libuv's default pool: no sampling ahead) and
 * runs itself again in a child with UV_THREADPOOL_SIZE=1, where every lean token must have been sampled ahead, and a
 * token decoded ahead by a loop alone goes straight to the native context (engine/soloDecode.ts) wherever nothing else
 * is in the way.
 */
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import {after, before, describe, test} from "node:test";
import {generateTokens, leanInternals, type GeneratedToken} from "../../engine/leanDecode.js";
import type {LlamaContextSequence, SequenceEvaluateOptions, Token} from "../../engine/llamaTypes.js";
import {loadModel, type LoadedModel} from "../../engine/modelLoader.js";
import {sampleAheadOf, type SampleAhead} from "../../engine/sampleAhead.js";
import {sharesContextLock, soloDecodeOf, type SoloDecode} from "../../engine/soloDecode.js";
import {StepBarrier} from "../../engine/stepBarrier.js";
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
    let solo: SoloDecode | undefined;
    /** Samples queued ahead while `run` ran: behind node-llama-cpp's decodes, and behind solo decodes. */
    const queuedAheadDuring = async <T>(run: () => Promise<T>): Promise<[T, number, number]> => {
        const before = [ahead?.queuedAhead ?? 0, solo?.decodes ?? 0] as const;
        const result = await run();
        return [result, (ahead?.queuedAhead ?? 0) - before[0], (solo?.decodes ?? 0) - before[1]];
    };

    /** Runs `run` counting the native batch decodes (`decodes()`), by shadowing the addon's method on this context as sampleAhead.ts does. */
    const countingDecodes = async <T>(run: (decodes: () => number) => Promise<T>): Promise<[T, number]> => {
        const native = (loaded.context as unknown as {_ctx: {decodeBatch: (...args: unknown[]) => unknown}})._ctx;
        const own = Object.getOwnPropertyDescriptor(native, "decodeBatch");
        const decodeBatch = native.decodeBatch;
        let decodes = 0;
        Object.defineProperty(native, "decodeBatch", {configurable: true, value: (...args: unknown[]) => {
            decodes++;
            return decodeBatch.apply(native, args);
        }});
        try {
            return [await run(() => decodes), decodes];
        } finally {
            if (own !== undefined)
                Object.defineProperty(native, "decodeBatch", own);
            else
                delete (native as {decodeBatch?: unknown}).decodeBatch;
        }
    };

    before(async () => {
        loaded = await loadModel({modelPath: stories.path!, threads: 1, parallel: 2, contextSize: 512, gpu: "off"}, () => undefined);
        lean = loaded.context.getSequence();
        reference = loaded.context.getSequence();
        prompt = loaded.model.tokenize("Once upon a time, there was a little girl named Lily. She", true);
        ahead = sampleAheadOf((loaded.context as unknown as {_ctx: object})._ctx);
        solo = soloDecodeOf((loaded.context as unknown as {_ctx: object})._ctx);
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
        assert.equal(solo !== undefined, onePoolThread, "the solo decode goes with sampling ahead");
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
                    const [outputs, sampledAhead, soloDecodes] = await queuedAheadDuring(async () => {
                        const outputs: GeneratedToken[] = [];
                        for await (const output of tokens) {
                            outputs.push(output);
                            generated.push(output.token);
                            if (outputs.length >= count)
                                break;
                        }
                        return outputs;
                    });
                    assert.equal(sampledAhead + soloDecodes, loop === "lean" && onePoolThread ? count + (decodeAhead ? 1 : 0) : 0,
                        `${loop}: tokens sampled ahead`);
                    // Alone, every token decoded ahead goes solo but where node-llama-cpp's dispatch of the one before still
                    // holds the context's lock (the prompt's, at most a few tokens after it).
                    if (loop === "lean" && onePoolThread && decodeAhead)
                        assert.ok(soloDecodes >= count - 4, `only ${soloDecodes} of ${count} tokens decoded solo`);
                    else
                        assert.equal(soloDecodes, 0, `${loop}: solo decodes where none was asked for`);
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
        const decodedAhead: boolean[] = [];
        const generated: Token[] = [];
        await countingDecodes(async (decodes) => {
            for await (const output of generateTokens(lean, prompt, {}, {temperature: 0}, () => generated.length % 2 === 0)) {
                generated.push(output.token);
                // The prompt's decode, one per token fed back so far, and this token's if it went ahead.
                decodedAhead.push(decodes() === generated.length + 1);
                if (generated.length >= 12)
                    break;
            }
        });
        assert.deepEqual(decodedAhead, decodedAhead.map((_, i) => i % 2 === 0));
        assert.equal(lean.nextTokenIndex, prompt.length + 12 - 1, "the last token was not to be decoded");
    });

    test("the solo decode takes node-llama-cpp's context lock: the copy of lifecycle-utils node-llama-cpp imports, no other", async () => {
        const lockModulePath = createRequire(createRequire(__filename).resolve("node-llama-cpp")).resolve("lifecycle-utils");
        const context = loaded.context as unknown as Parameters<typeof sharesContextLock>[1];
        const theirs = await import(pathToFileURL(lockModulePath).href) as Parameters<typeof sharesContextLock>[0];
        // The locks are the state of its withLock.js: that file under another URL is another instance, with locks of its own.
        const another = await import(`${new URL("withLock.js", pathToFileURL(lockModulePath)).href}?another-copy`) as
            Parameters<typeof sharesContextLock>[0];
        assert.notEqual(another.withLock, theirs.withLock);
        assert.equal(await sharesContextLock(theirs, context), true);
        assert.equal(await sharesContextLock(another, context), false);
        // Neither check leaves anything behind: a loop still decodes.
        await lean.clearHistory();
        assert.equal((await take(generateTokens(lean, prompt, {}, {temperature: 0}), 3)).length, 3);
    });

    // The solo decode needs one libuv thread: the run in a child has it.
    if (onePoolThread)
        test("a loop decoding ahead alone, joined by another: each gets the tokens it gets alone, and the sequences hold them", async () => {
            const otherPrompt = loaded.model.tokenize("The dog ran to the park and", true);
            const n = 40;
            await reference.clearHistory();
            const otherAlone = await take(generateTokens(reference, otherPrompt, {}, {temperature: 0}), n);
            await lean.clearHistory();
            const leanAlone = await take(generateTokens(lean, prompt, {}, {temperature: 0}, () => true), n);
            await lean.clearHistory();
            await reference.clearHistory();
            // The other request arrives after the 8th token: from then on the first loop's tokens go through node-llama-cpp's
            // batches again (a decode queued, a dispatch holding the lock), and solo again once the other has finished.
            let other: Promise<GeneratedToken[]> | undefined;
            const soloBefore = solo!.decodes;
            let soloWhenJoined = 0;
            const leanTogether: GeneratedToken[] = [];
            for await (const output of generateTokens(lean, prompt, {}, {temperature: 0}, () => true)) {
                leanTogether.push(output);
                if (leanTogether.length === 8) {
                    soloWhenJoined = solo!.decodes - soloBefore;
                    other = take(generateTokens(reference, otherPrompt, {}, {temperature: 0}), n);
                }
                if (leanTogether.length >= n)
                    break;
            }
            const otherTogether = await other!;
            assert.ok(soloWhenJoined >= 4, `only ${soloWhenJoined} solo decodes before the other request came`);
            assert.deepEqual(leanTogether.map((o) => o.token), leanAlone.map((o) => o.token));
            assert.deepEqual(otherTogether.map((o) => o.token), otherAlone.map((o) => o.token));
            // Every token the loop was given is held, the last one too (decoded ahead); nothing twice, nothing missing.
            assert.deepEqual(lean.contextTokens, [...prompt, ...leanTogether.map((o) => o.token)]);
            assert.equal(lean.nextTokenIndex, prompt.length + n);
        });

    test("two loops in lockstep, each step decoded ahead once both tokens are in (StepBarrier.tokenIn): one batch a step, " +
        "each loop's tokens as alone", async () => {
        const otherPrompt = loaded.model.tokenize("The dog ran to the park and", true);
        const n = 24;
        await lean.clearHistory();
        await reference.clearHistory();
        const alone = [await take(generateTokens(lean, prompt, {}, {temperature: 0}), n),
            await take(generateTokens(reference, otherPrompt, {}, {temperature: 0}), n)];
        await lean.clearHistory();
        await reference.clearHistory();
        const barrier = new StepBarrier(loaded.context.batchSize, {mayDecodeAhead: () => true});
        // As the engine drives them: joined and submitted together, each token offered ahead but the last, which ends it.
        const run = async (sequence: LlamaContextSequence, input: Token[], order: number): Promise<GeneratedToken[]> => {
            const member = barrier.join(order);
            barrier.submitted(member, input.length);
            const out: GeneratedToken[] = [];
            try {
                for await (const output of generateTokens(sequence, input, {}, {temperature: 0},
                    () => barrier.tokenIn(member, out.length + 1 < n ? "continues" : "ends"))) {
                    out.push(output);
                    if (out.length >= n)
                        break;
                    await barrier.arrive(member);
                }
            } finally {
                barrier.leave(member);
            }
            return out;
        };
        const soloBefore = solo?.decodes ?? 0;
        const [together, decodes] = await countingDecodes(() => Promise.all([run(lean, prompt, 0), run(reference, otherPrompt, 1)]));
        assert.deepEqual(together.map((outputs) => outputs.map((o) => o.token)), alone.map((outputs) => outputs.map((o) => o.token)));
        // Both prompts in one batch, then one batch per step for the tokens 1 … n − 1 of both (the n-th ends them).
        assert.equal(decodes, n, "the loops' decodes did not share one batch per step");
        // With one libuv thread those batches go straight on the native context (SoloDecode.gather).
        assert.equal((solo?.decodes ?? 0) - soloBefore, onePoolThread ? 2 * (n - 1) : 0);
        assert.deepEqual(lean.contextTokens, [...prompt, ...together[0]!.slice(0, n - 1).map((o) => o.token)]);
        assert.deepEqual(reference.contextTokens, [...otherPrompt, ...together[1]!.slice(0, n - 1).map((o) => o.token)]);
    });

    test("decoding ahead up to a full context: node-llama-cpp shifts it, and the tokens are its own loop's", async () => {
        const story = loaded.model.tokenize("Once upon a time, there was a little girl named Lily. She liked to play in the park. ".repeat(60), true);
        // Ten cells short of the sequence's end: the loop has to make room a few tokens in.
        const longPrompt = story.slice(0, loaded.context.contextSize - 10);
        const n = 24;
        const sides: Token[][] = [];
        let soloDecodes = 0;
        for (const [sequence, loop] of [[lean, "lean"], [reference, "node-llama-cpp"]] as const) {
            await sequence.clearHistory();
            const tokens = loop === "lean" ? generateTokens(sequence, longPrompt, {}, {temperature: 0}, () => true)
                : sequence.evaluateWithMetadata(longPrompt, {}, {temperature: 0, yieldEogToken: true}) as AsyncGenerator<GeneratedToken, void, undefined>;
            const [outputs, , solos] = await queuedAheadDuring(() => take(tokens, n));
            sides.push(outputs.map((o) => o.token));
            if (loop === "lean")
                soloDecodes = solos;
        }
        assert.deepEqual(sides[0], sides[1]);
        // Solo up to the full context, node-llama-cpp's path for the token that needs room, solo again after it.
        if (onePoolThread)
            assert.ok(soloDecodes >= n - 6 && soloDecodes < n, `${soloDecodes} of ${n} tokens decoded solo`);
        assert.ok(lean.nextTokenIndex < loaded.context.contextSize, "the sequence did not make room");
        assert.ok(lean.nextTokenIndex < longPrompt.length, "no context shift happened");
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
