/**
 * The panel: validates what the host sends (dropping and counting bad messages), applies it to the
 * store, answers with protocol messages, and redraws at most once per animation frame.
 */
import {cacheChart} from "./charts/cacheChart.js";
import type {LiveChart} from "./charts/chartCard.js";
import {applyChartDefaults, type ChartJs} from "./charts/chartSetup.js";
import {HistogramChart} from "./charts/histogramChart.js";
import {latencyChart} from "./charts/latencyChart.js";
import {requestsChart} from "./charts/requestsChart.js";
import {throughputChart} from "./charts/throughputChart.js";
import {TimelineChart} from "./charts/timelineChart.js";
import {ClientsTable} from "./clientsTable.js";
import {SequencesCard} from "./sequencesCard.js";
import {Controls, timeWindows} from "./controls.js";
import {el} from "./dom.js";
import {downloadText} from "./download.js";
import {Header} from "./header.js";
import {SourcePicker} from "./sourcePicker.js";
import {KpiTiles} from "./kpiTiles.js";
import {
    ExportMessage, PanelProtocolError, ReadyMessage, RequestSnapshotMessage, ResetMessage, SelectSourceMessage, SetPausedMessage,
    panelProtocolVersion, parseHostToPanel, type HostToPanel, type PanelToHost, type SnapshotReason
} from "../protocol/panelMessages.js";
import {StatsStore} from "./store.js";
import {readTheme, watchTheme, type Theme} from "./theme.js";
import type {ConnectionStatus} from "./transport.js";

export type PanelCounters = {received: number, rejected: number, gaps: number, renders: number, lastRejection: string};

export class PanelApp {
    readonly store = new StatsStore();
    readonly counters: PanelCounters = {received: 0, rejected: 0, gaps: 0, renders: 0, lastRejection: ""};
    private readonly header = new Header();
    private readonly sourcePicker = new SourcePicker((key) => this.send(SelectSourceMessage.create({key})));
    private readonly kpis = new KpiTiles();
    private readonly clients = new ClientsTable();
    private readonly sequences = new SequencesCard();
    private readonly controls: Controls;
    private readonly charts: LiveChart[];
    /** The request waterfall (also in `charts`), with its client filter. */
    readonly timeline: TimelineChart;
    private windowMs: number = timeWindows[1].ms;
    private paused = false;
    private frame: number | undefined;
    /** performance.now() when the store last changed, to extrapolate the host clock between deltas. */
    private changedAt = performance.now();
    private send: (message: PanelToHost) => void = () => {};

    /** `chartjs`: from `loadChartJs()`. */
    constructor(root: HTMLElement, private readonly chartjs: ChartJs) {
        const theme = readTheme();
        applyChartDefaults(chartjs, theme);
        this.controls = new Controls({
            setPaused: (paused) => this.setPaused(paused),
            reset: () => this.send(ResetMessage.create({})),
            export: (format) => {
                this.controls.setNotice(`exporting ${format.toUpperCase()}…`);
                this.send(ExportMessage.create({format}));
            },
            setWindow: (ms) => {
                this.windowMs = ms;
                this.scheduleRender();
            }
        }, this.windowMs);
        const grid = el("div", "charts");
        this.header.titleElement.append(this.sourcePicker.element);
        root.replaceChildren(this.header.element, this.controls.element, this.kpis.element, this.sequences.element, this.clients.element,
            grid);
        // Charts are made once their canvases are in the document (chart.js measures the parent).
        this.timeline = new TimelineChart(chartjs, theme);
        this.charts = [
            throughputChart(chartjs, theme), latencyChart(chartjs, theme), requestsChart(chartjs, theme), cacheChart(chartjs, theme),
            new HistogramChart(chartjs, theme), this.timeline
        ];
        grid.append(...this.charts.map((chart) => chart.element));
        watchTheme((next) => this.applyTheme(next));
        this.store.onChange(() => {
            this.changedAt = performance.now();
            this.scheduleRender();
        });
        setInterval(() => this.scheduleRender(), 1000);
        this.controls.setConnection("connecting");
    }

    /** Where outgoing messages go (the transport). */
    connect(send: (message: PanelToHost) => void): void {
        this.send = send;
    }

    /** The channel is (again) up: announce the panel; the host answers with a snapshot. */
    onOpen(): void {
        this.send(ReadyMessage.create({protocolVersion: panelProtocolVersion}));
        if (this.paused)
            this.send(SetPausedMessage.create({paused: true}));
    }

    onStatus(status: ConnectionStatus): void {
        this.controls.setConnection(status);
    }

    /** A raw message from the host: validated here, dropped and counted when bad. */
    receive(raw: unknown): void {
        let message: HostToPanel;
        try {
            message = parseHostToPanel(raw);
        } catch (error) {
            this.counters.rejected++;
            this.counters.lastRejection = error instanceof PanelProtocolError ? error.message : String(error);
            this.controls.setRejected(this.counters.rejected);
            return;
        }
        this.counters.received++;
        switch (message.type) {
            case "snapshot":
                this.store.applySnapshot(message);
                return;
            case "delta": {
                if (this.paused)
                    return;
                const outcome = this.store.applyDelta(message.delta);
                if (outcome === "gap") {
                    this.counters.gaps++;
                    this.requestSnapshot("seqGap");
                }
                return;
            }
            case "paused":
                this.paused = message.paused;
                this.controls.setPaused(message.paused);
                return;
            case "exportResult":
                if (message.content !== undefined) {
                    downloadText(message.fileName, message.mimeType, message.content);
                    this.controls.setNotice(`exported ${message.fileName}`);
                } else
                    this.controls.setNotice(message.savedTo !== undefined ? `saved to ${message.savedTo}` : `exported ${message.fileName}`);
                return;
            case "error":
                this.controls.setNotice(message.message, "error");
                return;
            case "sources":
                this.sourcePicker.update(message.sources, message.selected);
                return;
        }
    }

    private setPaused(paused: boolean): void {
        this.paused = paused;
        this.controls.setPaused(paused);
        this.send(SetPausedMessage.create({paused}));
        if (!paused)
            this.requestSnapshot("resume");
    }

    private requestSnapshot(reason: SnapshotReason): void {
        this.send(RequestSnapshotMessage.create({reason}));
    }

    private applyTheme(theme: Theme): void {
        applyChartDefaults(this.chartjs, theme);
        for (const chart of this.charts)
            chart.applyTheme(theme);
        this.scheduleRender();
    }

    private scheduleRender(): void {
        if (this.frame !== undefined)
            return;
        this.frame = requestAnimationFrame(() => {
            this.frame = undefined;
            this.render();
        });
    }

    private render(): void {
        const store = this.store;
        if (!store.hasData)
            return;
        this.counters.renders++;
        const hostNow = store.t + (performance.now() - this.changedAt);
        this.header.update(store, hostNow);
        this.kpis.update(store.view, hostNow);
        this.sequences.update(store.requests.values(), store.view.engine, store.view.target);
        this.clients.update(store.view.clients);
        const context = {store, windowMs: this.windowMs};
        for (const chart of this.charts)
            chart.update(context);
    }
}
