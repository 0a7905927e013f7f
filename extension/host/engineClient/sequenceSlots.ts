/**
 * Which request each engine sequence runs, or last ran, as the host sees it: the requests' lifecycles (live objects,
 * their `sequence` set by the engine's `scheduled` events), the settings each was sent with, and whether its output has
 * a line break yet. It backs llama.cpp's `GET /slots` (extension/host/llamacpp/slotsRoute.ts).
 */
import type {GenerateRequest} from "../../../protocol/engineMessages.js";
import {loraScaleEntries, type LoraAdapter, type LoraScaleEntry} from "../../../protocol/loraAdapters.js";
import type {RequestLifecycle} from "../../../protocol/requestLifecycle.js";
import type {EngineStep} from "./engineStep.js";

/** The fields of a request a slot reports. */
export type SlotSettings = Pick<GenerateRequest, "temperature" | "topP" | "topK" | "minP" | "seed" | "penalties" | "dry" | "xtc" |
    "ignoreEos">;

/** A request as it was sent. */
export type SentRequest = {
    /** Its number among those this engine was sent (llama-server's `id_task`). */
    task: number,
    settings: SlotSettings,
    /** Whether its output so far has a line break. */
    hasNewLine: boolean,
    /** The LoRA scales it asked for (GenerateRequest.loraScales); undefined: the server's when it started. */
    loraScales: readonly number[] | undefined
};

/** `lora`: the adapters' scales the request runs with (its own, else the server's when it started). */
export type SequenceSlot = {lifecycle: RequestLifecycle, sent: SentRequest, lora: LoraScaleEntry[]};

export class SequenceSlots {
    private readonly sent = new Map<string, SentRequest>();
    private readonly bySequence = new Map<number, SequenceSlot>();
    /** Sequences whose tokens a slot action set since their last request (`heldAfterAction`). */
    private readonly heldAfterAction = new Map<number, number>();
    private tasks = 0;

    /** `adapters`: the engine's LoRA adapters with their scales now (EngineInfo.loraAdapters). */
    constructor(private readonly adapters: () => readonly LoraAdapter[]) {}

    /** A generate request was sent. */
    sentRequest(request: GenerateRequest): void {
        const {temperature, topP, topK, minP, seed, penalties, dry, xtc, ignoreEos} = request;
        this.sent.set(request.id, {task: this.tasks++, hasNewLine: false, loraScales: request.loraScales,
            settings: {temperature, topP, topK, minP, seed, penalties, dry, xtc, ignoreEos}});
    }

    /** Output text of a request. */
    text(id: string, text: string): void {
        const sent = this.sent.get(id);
        if (sent !== undefined && !sent.hasNewLine && text.includes("\n"))
            sent.hasNewLine = true;
    }

    onStep(step: EngineStep): void {
        for (const lifecycle of step.iteration.updated) {
            const sent = this.sent.get(lifecycle.id);
            if (sent === undefined)
                continue;
            if (lifecycle.sequence !== undefined && lifecycle.phase === "running" && this.bySequence.get(lifecycle.sequence)?.lifecycle !== lifecycle) {
                const lora = sent.loraScales?.map((scale, id) => ({id, scale})) ?? loraScaleEntries(this.adapters());
                this.bySequence.set(lifecycle.sequence, {lifecycle, sent, lora});
                this.heldAfterAction.delete(lifecycle.sequence);
            }
            if (lifecycle.phase === "finished")
                this.sent.delete(lifecycle.id);
        }
    }

    /** A slot action left `sequence` holding `tokens` (erased: 0; restored: the file's). */
    slotAction(sequence: number, tokens: number): void {
        this.heldAfterAction.set(sequence, tokens);
    }

    /** The request on `sequence` now, or the last one there; undefined: none yet. */
    slot(sequence: number): SequenceSlot | undefined {
        return this.bySequence.get(sequence);
    }

    /**
     * The tokens `sequence` holds since a slot action after its last request (which then no longer tells what it
     * holds); undefined: no action since.
     */
    heldSinceAction(sequence: number): number | undefined {
        return this.heldAfterAction.get(sequence);
    }

    /** A new engine: its sequences are empty. */
    clear(): void {
        this.sent.clear();
        this.bySequence.clear();
        this.heldAfterAction.clear();
    }
}
