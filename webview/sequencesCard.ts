/**
 * The engine's sequences now (llama.cpp calls them slots): for each, the request running on it — its client, its id and
 * the tokens the sequence holds (its prompt and what it generated so far) against the sequence's context — or "free".
 * Read from the requests' lifecycles (their `sequence`, RequestLifecycle). Not shown while the panel watches other
 * servers, whose requests carry no sequence. Each row carries `data-sequence` and `data-state` ("busy" or "free").
 */
import type {EngineInfo} from "../protocol/engineMessages.js";
import type {RequestLifecycle} from "../protocol/requestLifecycle.js";
import {formatNumber} from "../common/format.js";
import {el} from "./dom.js";

export type SequenceRow = {
    sequence: number,
    /** The request running on it; undefined: free. */
    request?: {id: string, client: string, tokens: number, fraction: number}
};

/** One row per sequence of an engine with `parallel` sequences of `contextSize` tokens each. */
export function sequenceRows(requests: Iterable<RequestLifecycle>, parallel: number, contextSize: number): SequenceRow[] {
    const rows: SequenceRow[] = Array.from({length: parallel}, (_, sequence) => ({sequence}));
    for (const record of requests) {
        const row = record.sequence !== undefined && record.phase === "running" ? rows[record.sequence] : undefined;
        if (row === undefined)
            continue;
        const tokens = record.promptTokens + record.generatedTokens;
        row.request = {id: record.id, client: record.client, tokens, fraction: contextSize > 0 ? Math.min(1, tokens / contextSize) : 0};
    }
    return rows;
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

    /** `engine`: our engine's info (null: none, or the panel watches other servers). */
    update(requests: Iterable<RequestLifecycle>, engine: EngineInfo | null): void {
        if (engine === null) {
            this.element.hidden = true;
            this.shownKey = "";
            return;
        }
        this.element.hidden = false;
        const rows = sequenceRows(requests, engine.parallel, engine.contextSize);
        const key = JSON.stringify([engine.contextSize, rows]);
        if (key === this.shownKey)
            return;
        this.shownKey = key;
        const busy = rows.filter((row) => row.request !== undefined).length;
        this.note.textContent = `${busy} of ${rows.length} busy · ${formatNumber(engine.contextSize)} tokens each`;
        this.list.replaceChildren(...rows.map((row) => this.rowElement(row, engine.contextSize)));
    }

    private rowElement({sequence, request}: SequenceRow, contextSize: number): HTMLElement {
        const row = el("div", "sequence-row");
        row.dataset.sequence = String(sequence);
        row.dataset.state = request === undefined ? "free" : "busy";
        const bar = el("div", "sequence-bar");
        const fill = el("div", "sequence-fill");
        fill.style.width = `${((request?.fraction ?? 0) * 100).toFixed(1)}%`;
        bar.append(fill);
        const text = request === undefined ? "free"
            : `${request.client} · ${request.id.slice(0, 6)} · ${formatNumber(request.tokens)} / ${formatNumber(contextSize)} tokens`;
        bar.title = text;
        row.append(el("span", "sequence-index", `#${sequence}`), bar, el("span", "sequence-text", text));
        return row;
    }
}
