/**
 * The toolbar: pause / resume, reset, export (JSON, CSV), the time window of the live charts
 * (1 / 5 / 15 min), and a status line (connection, notices, dropped messages).
 */
import {el, setText} from "./dom.js";
import type {ExportFormat} from "../protocol/panelMessages.js";
import type {ConnectionStatus} from "./transport.js";
import {formatCount} from "../common/format.js";

export const timeWindows = [{label: "1 min", ms: 60_000}, {label: "5 min", ms: 5 * 60_000}, {label: "15 min", ms: 15 * 60_000}] as const;

export type ControlHandlers = {
    setPaused(paused: boolean): void,
    reset(): void,
    export(format: ExportFormat): void,
    setWindow(ms: number): void
};

export class Controls {
    readonly element = el("nav", "controls");
    private readonly pauseButton = el("button", "button", "Pause");
    private readonly connection = el("span", "connection");
    private readonly notice = el("span", "notice");
    private readonly rejected = el("span", "rejected");
    private paused = false;

    constructor(private readonly handlers: ControlHandlers, initialWindowMs: number) {
        this.element.setAttribute("aria-label", "Panel controls");
        this.pauseButton.dataset.action = "pause";
        this.pauseButton.type = "button";
        this.pauseButton.setAttribute("aria-pressed", "false");
        this.pauseButton.addEventListener("click", () => this.handlers.setPaused(!this.paused));

        // Two clicks (no window.confirm: VS Code webviews block modal dialogs).
        let armed: ReturnType<typeof setTimeout> | undefined;
        const reset = this.button("Reset", "reset", "Clear all stats on the host (click twice)", () => {
            if (armed === undefined) {
                setText(reset, "Confirm reset");
                reset.classList.add("is-armed");
                armed = setTimeout(() => {
                    armed = undefined;
                    setText(reset, "Reset");
                    reset.classList.remove("is-armed");
                }, 3000);
                return;
            }
            clearTimeout(armed);
            armed = undefined;
            setText(reset, "Reset");
            reset.classList.remove("is-armed");
            this.handlers.reset();
        });
        const exportJson = this.button("Export JSON", "export-json", "The full stats snapshot", () => this.handlers.export("json"));
        const exportCsv = this.button("Export CSV", "export-csv", "The time series, one row per sample", () => this.handlers.export("csv"));

        const windowLabel = el("label", "window");
        const select = el("select");
        select.dataset.action = "window";
        for (const option of timeWindows) {
            const element = el("option", undefined, option.label);
            element.value = String(option.ms);
            element.selected = option.ms === initialWindowMs;
            select.append(element);
        }
        select.addEventListener("change", () => this.handlers.setWindow(Number(select.value)));
        windowLabel.append("Window ", select);

        this.connection.dataset.field = "connection";
        this.notice.dataset.field = "notice";
        this.rejected.dataset.field = "rejected";
        const status = el("div", "status");
        status.append(this.connection, this.notice, this.rejected);
        const buttons = el("div", "buttons");
        buttons.append(this.pauseButton, reset, exportJson, exportCsv, windowLabel);
        this.element.append(buttons, status);
    }

    /** Shows the paused state (as confirmed by the panel or the host). */
    setPaused(paused: boolean): void {
        this.paused = paused;
        setText(this.pauseButton, paused ? "Resume" : "Pause");
        this.pauseButton.setAttribute("aria-pressed", String(paused));
        this.element.classList.toggle("is-paused", paused);
    }

    setConnection(status: ConnectionStatus): void {
        setText(this.connection, status === "open" ? "● live" : status === "connecting" ? "○ connecting…" : "○ disconnected, retrying…");
        this.connection.dataset.status = status;
    }

    setNotice(text: string, kind: "info" | "error" = "info"): void {
        setText(this.notice, text);
        this.notice.dataset.kind = kind;
    }

    setRejected(count: number): void {
        setText(this.rejected, count === 0 ? "" : `${formatCount(count, "malformed message")} dropped`);
    }

    private button(label: string, action: string, title: string, onClick: () => void): HTMLButtonElement {
        const button = el("button", "button", label);
        button.type = "button";
        button.title = title;
        button.dataset.action = action;
        button.addEventListener("click", onClick);
        return button;
    }
}
