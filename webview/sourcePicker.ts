/**
 * "Showing: [Local engine ▾]" in the header: what the panel shows when the host offers several
 * sources (the local engine, watched servers, their merged view). Hidden with one or none. Choosing
 * one asks the host (`selectSource`), which answers with that source's snapshot.
 */
import type {SourceChoice} from "../protocol/panelMessages.js";
import {el} from "./dom.js";

export class SourcePicker {
    readonly element = el("label", "source-picker");
    private readonly select = document.createElement("select");
    private shownJson = "";

    constructor(onSelect: (key: string) => void) {
        this.select.dataset.field = "source";
        this.select.setAttribute("aria-label", "What the panel shows");
        this.select.addEventListener("change", () => onSelect(this.select.value));
        this.element.append(el("span", undefined, "Showing"), this.select);
        this.element.hidden = true;
    }

    update(sources: readonly SourceChoice[], selected: string): void {
        const json = JSON.stringify([sources, selected]);
        if (json === this.shownJson)
            return;
        this.shownJson = json;
        this.select.replaceChildren(...sources.map((source) => {
            const option = document.createElement("option");
            option.value = source.key;
            option.textContent = source.label;
            return option;
        }));
        this.select.value = selected;
        this.element.hidden = sources.length <= 1;
    }
}
