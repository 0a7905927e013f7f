/**
 * The per-client table (who sends what): one row per client label, as the host's ClientStatsView
 * rows, in their order. Each row carries `data-client="<label>"` and each cell `data-col="<key>"`.
 */
import type {ClientStatsView} from "../protocol/statsView.js";
import {el} from "./dom.js";
import {formatNumber} from "../common/format.js";

const ms = (seconds: number | null): number | null => seconds === null ? null : seconds * 1000;
const pair = (a: number | null, b: number | null): string => `${formatNumber(a)} / ${formatNumber(b)}`;

export type ClientColumn = {key: string, label: string, title: string, text(row: ClientStatsView): string};

export const clientColumns: readonly ClientColumn[] = [
    {key: "client", label: "Client", title: "The client label of the requests", text: (r) => r.client},
    {key: "requests", label: "Requests", title: "Arrived since start or reset", text: (r) => formatNumber(r.arrived)},
    {key: "running", label: "Running", title: "In flight now", text: (r) => formatNumber(r.inFlight)},
    {key: "tokens", label: "Tokens prompt / gen", title: "Prompt / generated tokens of finished requests", text: (r) => pair(r.promptTokens, r.generationTokens)},
    {key: "ttft", label: "TTFT p50 / p99 ms", title: "Time to first token", text: (r) => pair(ms(r.ttftP50S), ms(r.ttftP99S))},
    {key: "itl", label: "ITL p50 / p99 ms", title: "Inter-token latency", text: (r) => pair(ms(r.itlP50S), ms(r.itlP99S))},
    {key: "errors", label: "Errors", title: "Failed (and aborted) requests",
        text: (r) => r.aborted > 0 ? `${formatNumber(r.failed)} (+${formatNumber(r.aborted)} aborted)` : formatNumber(r.failed)}
];

export class ClientsTable {
    readonly element = el("section", "card clients");
    private readonly body = el("tbody");
    private shown: readonly ClientStatsView[] | undefined;

    constructor() {
        this.element.dataset.card = "clients";
        const heading = el("div", "card-heading");
        heading.append(el("h2", undefined, "Clients"), el("span", "card-note", "per client label, since start or reset"));
        const table = el("table", "clients-table");
        const headRow = el("tr");
        for (const column of clientColumns) {
            const th = el("th", undefined, column.label);
            th.scope = "col";
            th.title = column.title;
            headRow.append(th);
        }
        const head = el("thead");
        head.append(headRow);
        table.append(head, this.body);
        const scroller = el("div", "table-box");
        scroller.append(table);
        this.element.append(heading, scroller);
    }

    /** Rebuilds the rows when the table changed (the store replaces it whole). */
    update(clients: readonly ClientStatsView[]): void {
        if (clients === this.shown)
            return;
        this.shown = clients;
        if (clients.length === 0) {
            const cell = el("td", "empty", "No requests yet");
            cell.colSpan = clientColumns.length;
            const row = el("tr");
            row.append(cell);
            this.body.replaceChildren(row);
            return;
        }
        this.body.replaceChildren(...clients.map((client) => {
            const row = el("tr");
            row.dataset.client = client.client;
            for (const column of clientColumns) {
                const cell = el(column.key === "client" ? "th" : "td", undefined, column.text(client));
                cell.dataset.col = column.key;
                if (column.key === "client")
                    cell.scope = "row";
                row.append(cell);
            }
            return row;
        }));
    }
}
