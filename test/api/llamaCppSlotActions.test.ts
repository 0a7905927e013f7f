/**
 * llama.cpp's slot actions (`POST /slots/{id}?action=save|restore|erase`) on our server with a save directory, against
 * llama-server with `--slot-save-path` on the same model (stories260K, greedy, two slots): the same answers for the same
 * actions, a restored slot's prompt found cached again, state files that cross between the two servers both ways, the
 * same refusals; and, on ours, damaged files refused with the engine still serving (llama-server aborts on a file cut
 * short in its last block), an action on a busy slot waiting for its request.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import type {LlamaCppSlot, LlamaCppSlotErased, LlamaCppSlotRestored, LlamaCppSlotSaved} from "../../protocol/llamaCppSlots.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();
const suite = "llama.cpp's slot actions, against llama-server with --slot-save-path";
const ourDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-slots-ours-"));
const theirDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "inference-monitor-slots-theirs-"));
const prompt = "Once upon a time, there was a little girl named Lily. She loved to play";

type Answer = {status: number, body: Record<string, unknown>};

describe(suite, {skip: llamaServerSkipReason(suite) || skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    const api = apiForSuite({modelPath: stories.path ?? "", contextSize: 2048, parallel: 2}, {slotSavePath: ourDirectory});
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: stories.path ?? "",
            // node-llama-cpp gives each sequence its own KV stream; a state file names its streams, so files cross between the
            // servers when llama-server's KV cache is not unified either.
            args: ["-t", "1", "-np", "2", "-c", "4096", "--no-kv-unified", "--no-webui", "--slot-save-path", theirDirectory],
            readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
        for (const directory of [ourDirectory, theirDirectory])
            fs.rmSync(directory, {recursive: true, force: true});
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    const both = (): Array<[origin: string, directory: string]> => [[ours(), ourDirectory], [peer!.origin, theirDirectory]];

    async function post(origin: string, pathAndQuery: string, body: unknown): Promise<Answer> {
        const response = await fetch(`${origin}${pathAndQuery}`, {method: "POST", headers: {"content-type": "application/json"},
            body: typeof body === "string" ? body : JSON.stringify(body)});
        return {status: response.status, body: await response.json() as Record<string, unknown>};
    }
    async function action<T>(origin: string, slot: number | string, name: string, filename?: string): Promise<T> {
        const answer = await post(origin, `/slots/${slot}?action=${name}`, filename === undefined ? {} : {filename});
        assert.equal(answer.status, 200, `${origin} ${name}: ${JSON.stringify(answer.body)}`);
        return answer.body as T;
    }
    /** What `GET /slots` says slot `slot` holds (`n_prompt_tokens`). */
    async function heldBy(origin: string, slot: number): Promise<number | undefined> {
        const listed = await (await fetch(`${origin}/slots`)).json() as LlamaCppSlot[];
        return listed.find((entry) => entry.id === slot)?.n_prompt_tokens;
    }
    /** A greedy completion on slot `slot`; the prompt tokens it found cached (`timings.cache_n`). */
    async function complete(origin: string, slot: number): Promise<number> {
        const answer = await post(origin, "/completion", {prompt, n_predict: 8, temperature: 0, id_slot: slot});
        assert.equal(answer.status, 200, `${origin}: ${JSON.stringify(answer.body)}`);
        return (answer.body.timings as {cache_n: number}).cache_n;
    }

    test("save, erase, restore: llama-server's answers, the same counts, and the restored prompt is found cached again", async () => {
        const answers = [];
        for (const [origin] of both()) {
            await complete(origin, 0);
            const saved = await action<LlamaCppSlotSaved>(origin, 0, "save", "story.bin");
            const erased = await action<LlamaCppSlotErased>(origin, 0, "erase");
            const heldErased = await heldBy(origin, 0);
            assert.equal(await complete(origin, 0), 0, `${origin}: nothing cached once erased`);
            await action<LlamaCppSlotErased>(origin, 0, "erase");
            const restored = await action<LlamaCppSlotRestored>(origin, 0, "restore", "story.bin");
            const heldRestored = await heldBy(origin, 0);
            const cached = await complete(origin, 0);
            answers.push({saved, erased, restored, cached, heldErased, heldRestored});
        }
        const [mine, theirs] = answers as [typeof answers[0], typeof answers[0]];
        for (const key of ["saved", "erased", "restored"] as const)
            assert.deepEqual(Object.keys(mine[key]).sort(), Object.keys(theirs[key]).sort(), key);
        assert.deepEqual(Object.keys(mine.saved.timings), Object.keys(theirs.saved.timings));
        assert.deepEqual(Object.keys(mine.restored.timings), Object.keys(theirs.restored.timings));
        assert.equal(mine.saved.id_slot, 0);
        assert.equal(mine.saved.filename, "story.bin");
        // The slot holds the prompt and the tokens generated but the last: the same on both.
        assert.equal(mine.saved.n_saved, theirs.saved.n_saved);
        assert.ok(mine.saved.n_saved > 8, JSON.stringify(mine.saved));
        assert.equal(mine.erased.n_erased, mine.saved.n_saved);
        assert.equal(mine.restored.n_restored, mine.saved.n_saved);
        assert.equal(mine.restored.n_read, mine.saved.n_written);
        assert.equal(theirs.restored.n_restored, theirs.saved.n_saved);
        assert.equal(mine.saved.n_written, fs.statSync(path.join(ourDirectory, "story.bin")).size);
        // GET /slots tells what the slot holds after each action, as llama-server's.
        assert.equal(mine.heldErased, theirs.heldErased);
        assert.equal(mine.heldErased, 0);
        assert.equal(mine.heldRestored, theirs.heldRestored);
        assert.equal(mine.heldRestored, mine.restored.n_restored);
        // Restored, the prompt is found cached but its last token, on both.
        assert.equal(mine.cached, theirs.cached);
        assert.ok(mine.cached > 10, `cached ${mine.cached}`);
    });

    test("a state file crosses between the servers both ways, and a slot id wraps around the slots (the answer names it as given)", async () => {
        for (const [origin] of both())
            await complete(origin, 1);
        const fromOurs = await action<LlamaCppSlotSaved>(ours(), 3, "save", "ours.bin");
        const fromTheirs = await action<LlamaCppSlotSaved>(peer!.origin, 3, "save", "theirs.bin");
        assert.equal(fromOurs.id_slot, 3);
        assert.equal(fromTheirs.id_slot, 3);
        fs.copyFileSync(path.join(ourDirectory, "ours.bin"), path.join(theirDirectory, "ours.bin"));
        fs.copyFileSync(path.join(theirDirectory, "theirs.bin"), path.join(ourDirectory, "theirs.bin"));
        for (const [origin, filename, saved] of [[ours(), "theirs.bin", fromTheirs], [peer!.origin, "ours.bin", fromOurs]] as const) {
            await action<LlamaCppSlotErased>(origin, 0, "erase");
            const restored = await action<LlamaCppSlotRestored>(origin, 0, "restore", filename);
            assert.equal(restored.n_restored, saved.n_saved, `${origin} restored ${filename}`);
            assert.ok(await complete(origin, 0) > 10, `${origin}: the prompt from the other server's file is found cached`);
        }
    });

    test("refusals as llama-server's: bad file names, actions and slot ids; a file that is not there", async () => {
        for (const [origin] of both()) {
            for (const filename of ["../escape.bin", "a/b.bin", "", " lead.bin", "trail.", "what?.bin"]) {
                const answer = await post(origin, "/slots/0?action=save", {filename});
                assert.equal(answer.status, 400, `${origin} ${JSON.stringify(filename)}: ${JSON.stringify(answer.body)}`);
                assert.match(JSON.stringify(answer.body), /Invalid filename/, origin);
            }
            const badAction = await post(origin, "/slots/0?action=copy", {filename: "x.bin"});
            assert.equal(badAction.status, 400, origin);
            assert.match(JSON.stringify(badAction.body), /Invalid action/);
            const badSlot = await post(origin, "/slots/first?action=erase", {});
            assert.equal(badSlot.status, 400, origin);
            assert.match(JSON.stringify(badSlot.body), /Invalid slot ID/);
            const missing = await post(origin, "/slots/0?action=restore", {filename: "never-saved.bin"});
            assert.equal(missing.status, 400, `${origin}: ${JSON.stringify(missing.body)}`);
            assert.match(JSON.stringify(missing.body), /Unable to restore slot/);
        }
        assert.ok(!fs.existsSync(path.join(ourDirectory, "..", "escape.bin")));
    });

    test("ours: a damaged state file is refused and the engine goes on serving (a file one byte short aborts llama.cpp)", async () => {
        await complete(ours(), 0);
        await action<LlamaCppSlotSaved>(ours(), 0, "save", "whole.bin");
        const whole = fs.readFileSync(path.join(ourDirectory, "whole.bin"));
        const damaged: Array<[name: string, bytes: Buffer, reason: RegExp]> = [
            ["short-by-one.bin", whole.subarray(0, whole.length - 1), /cut short/],
            ["half.bin", whole.subarray(0, Math.floor(whole.length / 2)), /cut short/],
            ["longer.bin", Buffer.concat([whole, Buffer.from([0, 0, 0, 0])]), /account for/],
            ["not-a-state.bin", Buffer.from("just some text, not a state"), /not a sequence state file/]
        ];
        for (const [name, bytes, reason] of damaged) {
            fs.writeFileSync(path.join(ourDirectory, name), bytes);
            const answer = await post(ours(), "/slots/0?action=restore", {filename: name});
            assert.equal(answer.status, 400, `${name}: ${JSON.stringify(answer.body)}`);
            assert.match(String((answer.body.error as {message: string}).message), reason, name);
        }
        assert.equal(api.client.state, "ready");
        assert.equal((await action<LlamaCppSlotRestored>(ours(), 0, "restore", "whole.bin")).n_read, whole.length);
        assert.ok(await complete(ours(), 0) > 10);
    });

    test("ours: an action on a busy slot waits until its request ends, and saves what the slot then holds", async () => {
        const streamed = fetch(`${ours()}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({prompt, n_predict: 300, temperature: 0, ignore_eos: true, stream: true, id_slot: 1})});
        const response = await streamed;
        const reader = response.body!.getReader();
        await reader.read();
        const saving = action<LlamaCppSlotSaved>(ours(), 1, "save", "busy.bin");
        let text = "";
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
            text += new TextDecoder().decode(chunk.value);
        const saved = await saving;
        const last = JSON.parse(text.trim().split("\n").filter((line) => line.startsWith("data: ")).at(-1)!.slice(6)) as
            {stop: boolean, tokens_evaluated: number, tokens_predicted: number};
        assert.equal(last.stop, true);
        assert.equal(last.tokens_predicted, 300);
        // The prompt and 299 of the 300 tokens (the last is sampled, never evaluated): saved once the request had ended; saved
        // at once, it would have held the prompt and the few tokens decoded by then.
        assert.equal(saved.n_saved, last.tokens_evaluated + 299);
    });
});
