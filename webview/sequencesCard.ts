/**
 * The engine's sequences now (llama.cpp calls them slots): for each, the request running on it — its client, its id and
 * the tokens the sequence holds (its prompt and what it generated so far) against the sequence's context, or while a
 * long prompt is evaluated in chunks how much of it is in — or "free".
 * Read from the requests' lifecycles (their `sequence`, RequestLifecycle). While the panel watches other servers, the
 * slots of those that list them (llama.cpp's): busy or free and the tokens each holds; hidden when none does. Each row
 * carries `data-sequence` and `data-state` ("busy" or "free").
 */
import type {EngineInfo} from "../protocol/engineMessages.js";
import type {RequestLifecycle} from "../protocol/requestLifecycle.js";
import type {TargetView} from "../protocol/targetView.js";
import {formatNumber} from "../common/format.js";
import {el} from "./dom.js";

export type SequenceRow = {
    sequence: number,
    /**
     * The request running on it; undefined: free. `prefill`: its prompt is being evaluated in chunks, `processed` of its
     * `total` tokens are in (RequestLifecycle.prefilledTokens).
     */
    request?: {id: string, client: string, tokens: number, fraction: number, prefill?: {processed: number, total: number}}
};

/** The share of a context of `contextSize` tokens that `tokens` fill (0 for an unknown context). */
const heldFraction = (tokens: number, contextSize: number): number => contextSize > 0 ? Math.min(1, tokens / contextSize) : 0;

/** One row per sequence of an engine with `parallel` sequences of `contextSize` tokens each. */
export function sequenceRows(requests: Iterable<RequestLifecycle>, parallel: number, contextSize: number): SequenceRow[] {
    const rows: SequenceRow[] = Array.from({length: parallel}, (_, sequence) => ({sequence}));
    for (const record of requests) {
        const row = record.sequence !== undefined && record.phase === "running" ? rows[record.sequence] : undefined;
        if (row === undefined)
            continue;
        const processed = record.prefilledTokens;
        const tokens = processed ?? record.promptTokens + record.generatedTokens;
        row.request = {id: record.id, client: record.client, tokens, fraction: heldFraction(tokens, contextSize),
            ...processed !== undefined ? {prefill: {processed, total: record.promptTokens}} : {}};
    }
    return rows;
}

/** A row as shown: `label` names the sequence ("#2", or "URL #2" among several servers). */
type ShownRow = {key: string, label: string, busy: boolean, fraction: number, text: string};

/** Our engine's rows as shown. */
export function engineRows(requests: Iterable<RequestLifecycle>, engine: Pick<EngineInfo, "parallel" | "contextSize">): ShownRow[] {
    const {contextSize} = engine;
    return sequenceRows(requests, engine.parallel, contextSize).map(({sequence, request}) => ({
        key: String(sequence), label: `#${sequence}`, busy: request !== undefined, fraction: request?.fraction ?? 0,
        text: request === undefined ? "free" : `${request.client} · ${request.id.slice(0, 6)} · ${request.prefill !== undefined
            ? `prompt ${formatNumber(request.prefill.processed)} / ${formatNumber(request.prefill.total)} evaluated`
            : `${formatNumber(request.tokens)} / ${formatNumber(contextSize)} tokens`}`
    }));
}

/** The watched servers' slots, for those that list them (busy slots: the tokens they hold). */
export function targetSlotRows(target: TargetView): ShownRow[] {
    const listing = target.replicas.filter((replica) => replica.slots !== undefined);
    return listing.flatMap((replica) => replica.slots!.map((slot, i) => {
        const prefix = listing.length > 1 ? `${replica.name} ` : "";
        return {key: `${prefix}${i}`, label: `${prefix}#${i}`, busy: slot.processing,
            fraction: slot.processing ? heldFraction(slot.tokens, slot.contextSize) : 0,
            text: slot.processing ? `busy · ${formatNumber(slot.tokens)} / ${formatNumber(slot.contextSize)} tokens` : "free"};
    }));
}

export class SequencesCard {
    readonly element = el("section", "card sequences");
    private readonly list = el("div", "sequence-list");
    private readonly note = el("span", "card-note");
    private shownKey = "";

    constructor() {
        this.element.dataset.card = "sequences";
        const heading = el("div", "card-heading");
        heading.append(el("h2", undefined, "Sequences"), this.note);
        this.element.append(heading, this.list);
        this.element.hidden = true;
    }

    /** `engine`: our engine's info (null: none); `target`: the watched servers (null: the panel shows our engine). */
    update(requests: Iterable<RequestLifecycle>, engine: EngineInfo | null, target: TargetView | null): void {
        const rows = target !== null ? targetSlotRows(target) : engine !== null ? engineRows(requests, engine) : [];
        if (rows.length === 0) {
            this.element.hidden = true;
            this.shownKey = "";
            return;
        }
        this.element.hidden = false;
        const key = JSON.stringify(rows);
        if (key === this.shownKey)
            return;
        this.shownKey = key;
        const busy = rows.filter((row) => row.busy).length;
        this.note.textContent = target === null && engine !== null
            ? `${busy} of ${rows.length} busy · ${formatNumber(engine.contextSize)} tokens each`
            : `${busy} of ${rows.length} slots busy`;
        this.list.replaceChildren(...rows.map((row) => this.rowElement(row)));
    }

    private rowElement(shown: ShownRow): HTMLElement {
        const row = el("div", "sequence-row");
        row.dataset.sequence = shown.key;
        row.dataset.state = shown.busy ? "busy" : "free";
        const bar = el("div", "sequence-bar");
        const fill = el("div", "sequence-fill");
        fill.style.width = `${(shown.fraction * 100).toFixed(1)}%`;
        bar.append(fill);
        bar.title = shown.text;
        row.append(el("span", "sequence-index", shown.label), bar, el("span", "sequence-text", shown.text));
        return row;
    }
}
