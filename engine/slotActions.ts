/**
 * llama-server's slot actions on the engine's sequences: save a sequence's state (its KV cache and the tokens it holds)
 * to a file, restore one from a file, erase what a sequence holds. As llama-server defers an action on a busy slot, an
 * action on a sequence that runs a request waits until the request leaves it; while an action runs, no request starts
 * there. A file to restore is checked first (sequenceStateFile.ts): llama.cpp aborts the process on some damaged files.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {EngineToHost, HostToEngine} from "../protocol/engineMessages.js";
import {errorMessage} from "../common/errorMessage.js";
import type {LlamaContextSequence} from "./llamaTypes.js";
import {
    readStateFileLayout, StateFileError, writePlainTokenCopy, type StateFileExpectation, type StateFileLayout
} from "./sequenceStateFile.js";

type SlotActionMessage = Extract<HostToEngine, {type: "slotAction"}>;
type Done = Extract<EngineToHost, {type: "slotActionDone"}>;

/** What an action needs of a slot: its sequence, and whether a request runs on it. */
export type ActionSlot = {readonly sequence: LlamaContextSequence, readonly request: unknown};

/** An action refused for its input (the file, the sequence), not for the engine. */
class InvalidSlotAction extends Error {}

export class SlotActions<Slot extends ActionSlot> {
    private readonly running = new Set<Slot>();
    private readonly deferred = new Map<Slot, SlotActionMessage[]>();
    private layout: Pick<StateFileExpectation, "blockStreams" | "vEntries"> | undefined;
    private temporaryFiles = 0;
    private disposed = false;

    constructor(private readonly options: {
        reply: (done: Done) => void,
        /** Tokens one sequence holds at most, and the vocabulary's size (undefined: unknown). */
        maxTokens: number, vocabularySize: number | undefined,
        /** A sequence an action held is free again. */
        onSlotFree: () => void,
        /** Whether no action may start now (new LoRA scales wait to be applied); `resume` runs the ones that waited. */
        held?: () => boolean
    }) {}

    /** Whether no action runs on any slot. */
    get idle(): boolean {
        return this.running.size === 0;
    }

    /** Whether an action runs on `slot` (no request may start there). */
    busy(slot: Slot): boolean {
        return this.running.has(slot);
    }

    /** Runs `message` on `slot` (undefined: no such sequence), or defers it while the slot is in use. */
    submit(slot: Slot | undefined, message: SlotActionMessage): void {
        if (this.disposed)
            return this.refuse(message, "the engine is shutting down", "engine_error");
        if (slot === undefined)
            return this.refuse(message, "Invalid slot ID", "invalid_request");
        if (slot.request !== undefined || this.running.has(slot) || this.options.held?.() === true) {
            const waiting = this.deferred.get(slot) ?? [];
            waiting.push(message);
            this.deferred.set(slot, waiting);
            return;
        }
        void this.run(slot, message);
    }

    /** A request left `slot`: runs the actions that waited for it. Returns whether one took the slot. */
    takeFreed(slot: Slot): boolean {
        if (this.options.held?.() === true)
            return false;
        const next = this.deferred.get(slot)?.shift();
        if (next === undefined)
            return false;
        void this.run(slot, next);
        return true;
    }

    /** No longer held: runs the actions that waited on `slots` where no request runs. */
    resume(slots: readonly Slot[]): void {
        for (const slot of slots)
            if (slot.request === undefined && !this.running.has(slot))
                this.takeFreed(slot);
    }

    /** Refuses every action still waiting; running ones finish. */
    dispose(): void {
        this.disposed = true;
        for (const waiting of this.deferred.values())
            for (const message of waiting.splice(0))
                this.refuse(message, "the engine is shutting down", "engine_error");
    }

    private refuse(message: SlotActionMessage, error: string, errorCode: "invalid_request" | "engine_error"): void {
        this.options.reply({type: "slotActionDone", seq: message.seq, tokens: 0, bytes: 0, ms: 0, error, errorCode});
    }

    private async run(slot: Slot, message: SlotActionMessage): Promise<void> {
        this.running.add(slot);
        const started = performance.now();
        try {
            const {tokens, bytes} = await this.perform(slot, message);
            this.options.reply({type: "slotActionDone", seq: message.seq, tokens, bytes, ms: performance.now() - started});
        } catch (error) {
            this.refuse(message, errorMessage(error), error instanceof InvalidSlotAction ? "invalid_request" : "engine_error");
        } finally {
            this.running.delete(slot);
            if (!this.takeFreed(slot))
                this.options.onSlotFree();
        }
    }

    private async perform({sequence}: Slot, {action, file}: SlotActionMessage): Promise<{tokens: number, bytes: number}> {
        switch (action) {
            case "save": {
                const tokens = sequence.contextTokens.length;
                try {
                    return {tokens, bytes: (await sequence.saveStateToFile(file!)).fileSize};
                } catch (error) {
                    await fs.rm(file!, {force: true});
                    throw new Error(`Unable to save slot: ${errorMessage(error)}`, {cause: error});
                }
            }
            case "restore": {
                let layout: StateFileLayout;
                try {
                    const expected = this.layout ?? await this.learnLayout(sequence);
                    layout = await readStateFileLayout(file!, {...expected, maxTokens: this.options.maxTokens,
                        vocabularySize: this.options.vocabularySize});
                } catch (error) {
                    const reason = error instanceof StateFileError ? error.message : (error as NodeJS.ErrnoException).code === "ENOENT"
                        ? "no such file" : errorMessage(error);
                    throw new InvalidSlotAction(`Unable to restore slot: ${path.basename(file!)}: ${reason}`, {cause: error});
                }
                // llama-server's file: loaded through a copy with the plain token list node-llama-cpp reads.
                const plainCopy = layout.packed !== undefined ? this.temporaryFile() : undefined;
                try {
                    if (plainCopy !== undefined)
                        await writePlainTokenCopy(file!, layout.packed!, plainCopy);
                    await sequence.loadStateFromFile(plainCopy ?? file!, {acceptRisk: true});
                } catch (error) {
                    // Whatever llama.cpp loaded before it gave up is not a state to keep (llama-server clears the slot too).
                    await sequence.clearHistory();
                    throw new InvalidSlotAction(`Unable to restore slot: ${errorMessage(error)}`, {cause: error});
                } finally {
                    if (plainCopy !== undefined)
                        await fs.rm(plainCopy, {force: true});
                }
                return {tokens: sequence.contextTokens.length, bytes: layout.bytes};
            }
            case "erase": {
                const tokens = sequence.contextTokens.length;
                await sequence.clearHistory();
                return {tokens, bytes: 0};
            }
        }
    }

    private temporaryFile(): string {
        return path.join(os.tmpdir(), `inference-monitor-slot-${process.pid}-${this.temporaryFiles++}.state`);
    }

    /**
     * This context's memory layout, read from a state it saves itself (of the sequence about to be restored, so nothing
     * else is touched): how many memory blocks and streams a file must have, and, once a saved sequence held tokens,
     * how many V entries its layers have.
     */
    private async learnLayout(sequence: LlamaContextSequence): Promise<Pick<StateFileExpectation, "blockStreams" | "vEntries">> {
        const file = this.temporaryFile();
        try {
            await sequence.saveStateToFile(file);
            const {blockStreams, vEntries} = await readStateFileLayout(file);
            const layout = {blockStreams, vEntries};
            if (vEntries !== undefined)
                this.layout = layout;
            return layout;
        } finally {
            await fs.rm(file, {force: true});
        }
    }
}
