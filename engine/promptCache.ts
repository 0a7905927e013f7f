/**
 * The prompt cache (llama-server's `--cache-ram`): the KV state of a sequence whose tokens a new request is about to
 * replace is saved first, and a later request whose prompt shares a longer prefix with a saved state than with any free
 * sequence restores it instead of evaluating that prefix again: conversations and agents beyond the sequence count keep
 * their prefixes. node-llama-cpp saves and restores a sequence's state only through files, so the states are files in a
 * private directory under the system's temporary directory (the OS keeps recently written ones in its page cache),
 * removed when the engine stops; directories left by an engine that died are removed by the next one.
 */
import {rmSync} from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {Token} from "./llamaTypes.js";
import {errorMessage} from "../common/errorMessage.js";

/** What the cache needs of a sequence (node-llama-cpp's LlamaContextSequence). */
export interface StatefulSequence {
    saveStateToFile(filePath: string): Promise<{fileSize: number}>,
    loadStateFromFile(filePath: string, acceptRisk: {acceptRisk: true}): Promise<void>
}

/**
 * A saved sequence state: its tokens (the KV cache's contents), its file, and the key of the LoRA scales it was computed with
 * (`scalesKey`; "" without adapters): only a request with the same scales restores it.
 */
export type SavedPrompt = {readonly tokens: readonly Token[], readonly file: string, readonly bytes: number, readonly key: string};

/** After this many saves in a row fail (a full disk), saving stops until the engine restarts; restoring goes on. */
export const maxFailedSavesInARow = 3;

/** Fewer tokens than this are not saved: evaluating them again costs about what saving and restoring does. */
const minSavedTokens = 32;
/** A saved state is restored only for at least this many more shared tokens than the best free sequence offers. */
const minRestoreGain = 16;
/**
 * A saved state is restored only when its shared prefix is at least this share of it (llama-server's): restoring a long
 * state to keep a sliver of it reads the whole file for little.
 */
const minKeptShare = 0.25;

const directoryPrefix = "inference-monitor-prompt-cache-";

/** How many leading tokens `a` and `b` share. */
function sharedPrefixLength(a: readonly Token[], b: readonly Token[]): number {
    const n = Math.min(a.length, b.length);
    let i = 0;
    while (i < n && a[i] === b[i])
        i++;
    return i;
}

export class PromptCache {
    /** Oldest first: eviction takes from the front. */
    private readonly saved: SavedPrompt[] = [];
    private bytes = 0;
    private nextFile = 0;
    private disposed = false;
    private failedSavesInARow = 0;
    private savingOff = false;
    /** Bumped by `clear`: a save that began before it is stale. */
    private generation = 0;

    private constructor(
        /** The cache's own directory. */
        readonly directory: string,
        private readonly limitBytes: number,
        private readonly warn: (message: string) => void
    ) {}

    /**
     * A cache of at most `limitMiB` MiB in a new directory under `parent` (default: the system's temporary directory).
     * `warn`: where its failures are told (a save that failed is not an error of any request).
     */
    static async create(limitMiB: number, warn: (message: string) => void, parent = os.tmpdir()): Promise<PromptCache> {
        await removeDirectoriesOfDeadEngines(parent);
        const directory = await fs.mkdtemp(path.join(parent, `${directoryPrefix}${process.pid}-`));
        return new PromptCache(directory, limitMiB * 1024 * 1024, warn);
    }

    /**
     * The saved state worth restoring for `input`, and the tokens it shares with it: the longest shared prefix, at least
     * `freeShared` + {@link minRestoreGain} tokens (`freeShared`: what the best free sequence shares with `input`) and
     * at least a quarter of the state; among those computed with the LoRA scales of `key` (`scalesKey`).
     */
    bestFor(input: readonly Token[], freeShared: number, key = ""): {prompt: SavedPrompt, shared: number} | undefined {
        let best: {prompt: SavedPrompt, shared: number} | undefined;
        for (const prompt of this.saved) {
            if (prompt.key !== key)
                continue;
            const shared = sharedPrefixLength(prompt.tokens, input);
            if (shared >= freeShared + minRestoreGain && shared >= prompt.tokens.length * minKeptShare && shared > (best?.shared ?? 0))
                best = {prompt, shared};
        }
        return best;
    }

    /** Takes `prompt` out of the cache, to restore it: its file is the caller's until {@link restore} deletes it. */
    take(prompt: SavedPrompt): void {
        const index = this.saved.indexOf(prompt);
        if (index < 0)
            return;
        this.saved.splice(index, 1);
        this.bytes -= prompt.bytes;
    }

    /**
     * Whether saving a sequence holding `tokens` adds anything: saving is on, there are enough of them, and not all in a
     * saved state already (one computed with the same LoRA scales, `key`).
     */
    worthSaving(tokens: readonly Token[], key = ""): boolean {
        return !this.savingOff && tokens.length >= minSavedTokens &&
            !this.saved.some((prompt) => prompt.key === key && sharedPrefixLength(prompt.tokens, tokens) === tokens.length);
    }

    /**
     * Saves `sequence`'s state, which holds `tokens` computed with the LoRA scales of `key`. Saved states with the same key
     * whose tokens it holds all of go (it supersedes them),
     * then the oldest ones while the cache is over its limit (this one too, if it alone is). A failure is warned about
     * once per run of failures; {@link maxFailedSavesInARow} in a row turn saving off (the disk is full, or the
     * directory went), with a last warning.
     */
    async save(sequence: StatefulSequence, tokens: readonly Token[], key = ""): Promise<void> {
        if (this.disposed || this.savingOff)
            return;
        const file = path.join(this.directory, `${this.nextFile++}.state`);
        const generation = this.generation;
        let bytes: number;
        try {
            ({fileSize: bytes} = await sequence.saveStateToFile(file));
            await expectSize(file, bytes);
        } catch (error) {
            await fs.rm(file, {force: true});
            this.saveFailed(error);
            return;
        }
        this.failedSavesInARow = 0;
        if (this.disposed || generation !== this.generation)
            return void await fs.rm(file, {force: true});
        const superseded = this.saved.filter((prompt) =>
            prompt.key === key && sharedPrefixLength(prompt.tokens, tokens) === prompt.tokens.length);
        const prompt: SavedPrompt = {tokens: [...tokens], file, bytes, key};
        this.saved.push(prompt);
        this.bytes += bytes;
        const evicted = [...superseded];
        for (const old of superseded)
            this.take(old);
        while (this.bytes > this.limitBytes && this.saved.length > 0) {
            const oldest = this.saved[0]!;
            this.take(oldest);
            evicted.push(oldest);
        }
        await Promise.all(evicted.map((old) => fs.rm(old.file, {force: true})));
    }

    private saveFailed(error: unknown): void {
        if (this.disposed)
            return;
        const reason = errorMessage(error);
        this.failedSavesInARow++;
        if (this.failedSavesInARow === 1)
            this.warn(`prompt cache: could not save a sequence's state: ${reason}`);
        if (this.failedSavesInARow >= maxFailedSavesInARow) {
            this.savingOff = true;
            this.warn(`prompt cache: ${this.failedSavesInARow} saves in a row failed (the last: ${reason}); no more saving until the ` +
                `engine restarts, the ${this.saved.length} saved state${this.saved.length === 1 ? "" : "s"} can still be restored`);
        }
    }

    /** Loads a prompt {@link take}n from the cache into `sequence`, then deletes its file (the sequence holds it now). */
    async restore(prompt: SavedPrompt, sequence: StatefulSequence): Promise<void> {
        try {
            await expectSize(prompt.file, prompt.bytes);
            await sequence.loadStateFromFile(prompt.file, {acceptRisk: true});
        } finally {
            await fs.rm(prompt.file, {force: true});
        }
    }

    /**
     * Forgets every saved state (their files go): they were computed with weights the model no longer runs with (new
     * LoRA scales). A save under way now is dropped when it completes.
     */
    async clear(): Promise<void> {
        this.generation++;
        const dropped = this.saved.splice(0);
        this.bytes = 0;
        await Promise.all(dropped.map((prompt) => fs.rm(prompt.file, {force: true})));
    }

    /** Deletes the directory and everything in it (synchronously: it also runs as the engine process exits). */
    dispose(): void {
        this.disposed = true;
        this.saved.length = 0;
        this.bytes = 0;
        rmSync(this.directory, {recursive: true, force: true});
    }
}

/**
 * Checks that `file` has the size its state was saved with. llama.cpp aborts the whole process on a state file shorter
 * than its header says (GGML_ASSERT), so a file cut short (a full disk) must never be loaded, nor kept.
 */
async function expectSize(file: string, bytes: number): Promise<void> {
    const {size} = await fs.stat(file);
    if (size !== bytes)
        throw new Error(`the state file ${path.basename(file)} has ${size} bytes, ${bytes} were saved`);
}

/** Removes the cache directories under `parent` of engine processes that no longer run (killed before they could). */
async function removeDirectoriesOfDeadEngines(parent: string): Promise<void> {
    let names: string[];
    try {
        names = await fs.readdir(parent);
    } catch {
        return;
    }
    for (const name of names) {
        const pid = Number(/^inference-monitor-prompt-cache-(\d+)-/.exec(name)?.[1]);
        if (Number.isSafeInteger(pid) && pid !== process.pid && !processRuns(pid))
            await fs.rm(path.join(parent, name), {recursive: true, force: true}).catch(() => undefined);
    }
}

function processRuns(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch (error) {
        // EPERM: it runs, as another user.
        return (error as NodeJS.ErrnoException).code === "EPERM";
    }
}
