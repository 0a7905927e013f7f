/** The frame of every chart: a titled card holding one canvas tagged `data-chart="<name>"`. */
import {el} from "../dom.js";
import type {StatsStore} from "../store.js";
import type {Theme} from "../theme.js";

/** What a chart reads on each frame. */
export type ChartContext = {
    store: StatsStore,
    /** The time window shown by the time-series charts, ms. */
    windowMs: number
};

/** A chart made once and updated in place (no re-creation, no animation). */
export interface LiveChart {
    readonly name: string,
    readonly element: HTMLElement,
    update(context: ChartContext): void,
    applyTheme(theme: Theme): void
}

/** `heading`: the title row, where a chart may add its own controls. */
export type ChartCard = {element: HTMLElement, heading: HTMLElement, box: HTMLElement, canvas: HTMLCanvasElement};

export function chartCard(name: string, title: string, note?: string, className = "card"): ChartCard {
    const element = el("section", className);
    element.dataset.card = name;
    const heading = el("div", "card-heading");
    heading.append(el("h2", undefined, title));
    if (note !== undefined)
        heading.append(el("span", "card-note", note));
    const box = el("div", "chart-box");
    const canvas = el("canvas");
    canvas.dataset.chart = name;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", title);
    box.append(canvas);
    element.append(heading, box);
    return {element, heading, box, canvas};
}
