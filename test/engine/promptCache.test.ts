/**
 * The prompt cache (EngineOptions.promptCacheMiB, llama-server's `--cache-ram`), on real node-llama-cpp: a sequence's
 * state is saved before a request replaces its tokens, and a later prompt starting the same restores it instead of
 * evaluating that prefix again; the output is exactly a cold engine's; the size limit evicts the oldest; a file cut short
 * is refused (llama.cpp would abort the process on it); the directory goes with the engine, and directories of engines
 * that died are removed by the next one.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import {maxFailedSavesInARow} from "../../engine/promptCache.js";
import {EngineUnderTest} from "../helpers/engineUnderTest.js";

const greedy = {temperature: 0, maxTokens: 16, ignoreEos: true} as const;
const conversations = [
    "Once upon a time there was a little girl who lived in a small house near the big park with her dog and her cat. " +
        "Every day she went to the park to play with her friends and the dog ran after the red ball under the blue sky.",
    "A small bird flew over the house and the tree and said hello to the sun. The bird had a nest in the old tree " +
        "and every morning it sang a song for the children who walked to school along the river.",
    "The boy found a big box in the garden. He opened it and saw a toy car, a red hat and a book about the sea. " +
        "He ran to his mother to show her what he had found and she smiled at him."
];

/** This process's prompt-cache directories under the temporary directory. */
function cacheDirectories(): Set<string> {
    const prefix = `inference-monitor-prompt-cache-${process.pid}-`;
    return new Set(fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith(prefix)).map((name) => path.join(os.tmpdir(), name)));
}

/** Starts an engine and returns it with the prompt-cache directory it created. */
async function startWithDirectory(options: Parameters<typeof EngineUnderTest.start>[0]): Promise<{engine: EngineUnderTest, dir: string}> {
    const before = cacheDirectories();
    const engine = await EngineUnderTest.start(options);
    const created = [...cacheDirectories()].filter((dir) => !before.has(dir));
    assert.equal(created.length, 1, `one new prompt-cache directory, got ${created.join(", ")}`);
    return {engine, dir: created[0]!};
}

describe("prompt cache", () => {
    let cached: EngineUnderTest;
    let dir: string;
    let cold: EngineUnderTest;

    before(async () => {
        ({engine: cached, dir} = await startWithDirectory({parallel: 1, promptCacheMiB: 64}));
        cold = await EngineUnderTest.start({parallel: 1, prefixCache: false});
    });
    after(async () => {
        await cached.engine.dispose();
        await cold.engine.dispose();
    });

    test("a conversation that lost its sequence is restored, and generates exactly what a cold engine does", async () => {
        const [a, b] = conversations as [string, string];
        const first = await cached.generate({prompt: a, ...greedy});
        assert.equal(first.restoredTokens, 0, "nothing saved yet");
        // b replaces a on the only sequence: a's state is saved first.
        const other = await cached.generate({prompt: b, ...greedy});
        assert.equal(other.restoredTokens, 0);
        assert.ok(other.cachedTokens <= 2, `b shares nothing with a (cached ${other.cachedTokens})`);
        assert.equal(fs.readdirSync(dir).length, 1, "a's state is in the cache");

        // a's next turn: its prompt starts with a and a's answer.
        const turn = `${a}${first.text} Then`;
        const again = await cached.generate({prompt: turn, ...greedy});
        const reference = await cold.generate({prompt: turn, ...greedy});
        assert.ok(again.restoredTokens! >= first.finished.promptTokens, `restored ${again.restoredTokens} of a's ` +
            `${first.finished.promptTokens + greedy.maxTokens} tokens for a prompt of ${again.finished.promptTokens}`);
        assert.equal(again.cachedTokens, again.restoredTokens, "all its cached tokens came from the prompt cache");
        assert.equal(again.text, reference.text, "a restored state must not change greedy output");
        // Only the rest of the prompt is evaluated, as with a prefix found on the sequence.
        assert.equal(again.stepTokens, again.finished.promptTokens - again.cachedTokens + greedy.maxTokens);
        // The restored state left the cache (the sequence holds it now); b's took its place when a's turn replaced it.
        assert.equal(fs.readdirSync(dir).length, 1);

        // b again: restored in turn.
        const backToB = await cached.generate({prompt: b, ...greedy});
        assert.equal(backToB.restoredTokens, backToB.finished.promptTokens - 1);
        assert.equal(backToB.text, other.text);
    });

    test("a prompt that keeps at least half of what the sequence holds saves nothing", async () => {
        const held = fs.readdirSync(dir).length;
        const [, b] = conversations as [string, string];
        const longer = await cached.generate({prompt: `${b} And the sun`, ...greedy});
        assert.equal(longer.restoredTokens, 0, "its prefix is on the sequence");
        assert.ok(longer.cachedTokens > longer.finished.promptTokens / 2);
        assert.equal(fs.readdirSync(dir).length, held);
    });

    test("a prompt to score is not restored (it is evaluated from its first token)", async () => {
        const [a] = conversations as [string];
        const scored = await cached.generate({prompt: a, maxTokens: 0, promptLogprobs: 0});
        assert.equal(scored.cachedTokens, 0);
        assert.equal(scored.restoredTokens, 0);
    });

    test("the directory goes when the engine stops", async () => {
        const {engine, dir: own} = await startWithDirectory({parallel: 1, promptCacheMiB: 8});
        const [a, b] = conversations as [string, string];
        await engine.generate({prompt: a, ...greedy});
        await engine.generate({prompt: b, ...greedy});
        assert.equal(fs.readdirSync(own).length, 1);
        await engine.engine.dispose();
        assert.equal(fs.existsSync(own), false);
    });
});

describe("prompt cache limits and failures", () => {
    test("over its limit, the oldest saved state goes", async () => {
        // The tiny model keeps 1 KiB per token: a conversation of ~60 tokens is ~60 KiB, so 1 MiB holds them all, and
        // ~0.13 MiB (under the MiB granularity, so a long context instead) must drop one.
        const long = conversations.map((text) => `${text} ${text} ${text} ${text} ${text} ${text} ${text} ${text} ${text} ${text}`);
        const {engine, dir} = await startWithDirectory({parallel: 1, promptCacheMiB: 1});
        try {
            const outcomes = [];
            for (const text of long)
                outcomes.push(await engine.generate({prompt: text, ...greedy}));
            const sizes = fs.readdirSync(dir).map((name) => fs.statSync(path.join(dir, name)).size);
            assert.equal(sizes.length, 1, `two ~${Math.round(sizes[0]! / 1024)} KiB states do not fit in 1 MiB: the older one went`);
            assert.ok(sizes[0]! > 512 * 1024, `a state of ${sizes[0]} bytes`);
            // The second conversation is restored (the third's state then takes its place); the first was evicted.
            const second = await engine.generate({prompt: long[1]!, ...greedy});
            assert.equal(second.restoredTokens, second.finished.promptTokens - 1);
            const first = await engine.generate({prompt: long[0]!, ...greedy});
            assert.equal(first.restoredTokens, 0);
        } finally {
            await engine.engine.dispose();
        }
    });

    test("a state file cut short is refused with a warning and the prompt is evaluated whole, correctly", async () => {
        const {engine, dir} = await startWithDirectory({parallel: 1, promptCacheMiB: 8});
        const cold = await EngineUnderTest.start({parallel: 1, prefixCache: false});
        try {
            const [a, b] = conversations as [string, string];
            await engine.generate({prompt: a, ...greedy});
            await engine.generate({prompt: b, ...greedy});
            const [file] = fs.readdirSync(dir);
            const full = path.join(dir, file!);
            fs.truncateSync(full, Math.floor(fs.statSync(full).size / 2));
            const retried = await engine.generate({prompt: a, ...greedy});
            assert.equal(retried.restoredTokens, 0);
            assert.equal(retried.cachedTokens, 0);
            assert.match(engine.logs.join("\n"), /prompt cache: could not restore a saved state: the state file \S+ has \d+ bytes, \d+ were saved/);
            assert.equal(retried.text, (await cold.generate({prompt: a, ...greedy})).text);
            assert.equal(fs.existsSync(full), false, "the bad file is gone");
        } finally {
            await engine.engine.dispose();
            await cold.engine.dispose();
        }
    });

    test("saves that keep failing (its directory gone) are warned about once, then saving stops; requests are unaffected", async () => {
        const {engine, dir} = await startWithDirectory({parallel: 1, promptCacheMiB: 8});
        try {
            fs.rmSync(dir, {recursive: true});
            const long = conversations.map((text) => `${text} ${text}`);
            const outcomes = [];
            // Each request replaces the previous one's tokens: a save each time from the second on.
            for (let i = 0; i < maxFailedSavesInARow + 2; i++)
                outcomes.push(await engine.generate({prompt: `${i} ${long[i % long.length]!}`, ...greedy}));
            assert.ok(outcomes.every((outcome) => outcome.finished.reason === "length" && outcome.restoredTokens === 0));
            const warnings = engine.logs.filter((line) => line.startsWith("prompt cache:"));
            assert.equal(warnings.length, 2, warnings.join("\n"));
            assert.match(warnings[0]!, /^prompt cache: could not save a sequence's state: Failed to save state to file$/);
            assert.match(warnings[1]!, new RegExp(`^prompt cache: ${maxFailedSavesInARow} saves in a row failed \\(the last: Failed to save ` +
                "state to file\\); no more saving until the engine restarts, the 0 saved states can still be restored$"));
        } finally {
            await engine.engine.dispose();
        }
    });

    test("a directory left by an engine that died is removed by the next one; a live one's is kept", async () => {
        // No process has this pid (Linux caps pids at 2^22).
        const dead = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-prompt-cache-999999999-"));
        fs.writeFileSync(path.join(dead, "0.state"), "left over");
        const live = fs.mkdtempSync(path.join(os.tmpdir(), `inference-monitor-prompt-cache-${process.ppid}-`));
        const {engine} = await startWithDirectory({parallel: 1, promptCacheMiB: 8});
        try {
            assert.equal(fs.existsSync(dead), false);
            assert.equal(fs.existsSync(live), true);
        } finally {
            await engine.engine.dispose();
            fs.rmSync(live, {recursive: true, force: true});
        }
    });

    test("off with 0, and with prefix caching off", async () => {
        for (const options of [{promptCacheMiB: 0}, {prefixCache: false}]) {
            const before = cacheDirectories();
            const engine = await EngineUnderTest.start({parallel: 1, ...options});
            try {
                assert.deepEqual([...cacheDirectories()].filter((dir) => !before.has(dir)), []);
                const outcome = await engine.generate({prompt: conversations[0]!, ...greedy});
                assert.equal(outcome.restoredTokens, undefined, "no prompt cache: the event has no restoredTokens");
            } finally {
                await engine.engine.dispose();
            }
        }
    });
});
