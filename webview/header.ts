/**
 * The header: model, backend, GPU, VRAM, context size, sequences, prefix cache on/off, engine state ("stalled for 3.2 s"
 * while stalled) and uptime. Each value element carries `data-field="<name>"`.
 */
import {el, setText} from "./dom.js";
import {formatBytes, formatDuration, formatNumber, formatParams} from "../common/format.js";
import type {StatsStore} from "./store.js";

const fields = [
    ["model", "Model"], ["backend", "Backend"], ["gpu", "GPU"], ["vram", "VRAM"], ["context", "Context"],
    ["sequences", "Sequences"], ["prefixCache", "Prefix cache"], ["uptime", "Uptime"]
] as const;
type FieldName = typeof fields[number][0];

const backendNames: Record<string, string> = {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"};

export class Header {
    readonly element = el("header", "header");
    private readonly state = el("span", "state-badge");
    private readonly values = new Map<FieldName, HTMLElement>();

    constructor() {
        const title = el("div", "header-title");
        title.append(el("h1", undefined, "Inference Monitor"), this.state);
        this.state.dataset.field = "state";
        const list = el("dl", "header-fields");
        for (const [name, label] of fields) {
            const item = el("div", "header-field");
            const value = el("dd");
            value.dataset.field = name;
            item.append(el("dt", undefined, label), value);
            list.append(item);
            this.values.set(name, value);
        }
        this.element.append(title, list);
    }

    /** `hostNow`: the host clock now (store time plus the time since it arrived). */
    update(store: StatsStore, hostNow: number): void {
        if (!store.hasData)
            return;
        const {engine, state, gauges} = store.view;
        this.set("model", engine === null ? "no model" : `${engine.model.name} (${engine.model.quantization}, ${formatParams(engine.model.parameterCount)} params)`);
        this.set("backend", engine === null ? "–" : backendNames[engine.backend] ?? engine.backend);
        this.set("gpu", engine === null ? "–" : engine.gpuDevices.length === 0 ? "none" : engine.gpuDevices.join(", "));
        const vramTotal = gauges.vramTotalBytes || engine?.vramTotalBytes || 0;
        this.set("vram", vramTotal > 0 ? `${formatBytes(gauges.vramUsedBytes)} / ${formatBytes(vramTotal)}` : "–");
        this.set("context", engine === null ? "–" : `${formatNumber(engine.contextSize)} tokens`);
        this.set("sequences", engine === null ? "–" : formatNumber(engine.parallel));
        this.set("prefixCache", engine === null ? "–" : engine.prefixCache ? "on" : "off");
        const startedAt = store.engineStartedAt;
        this.set("uptime", startedAt === undefined ? "–" : formatDuration(hostNow - startedAt));
        setText(this.state, state === "stalled" ? `stalled for ${formatDuration(gauges.msSinceLastStep)}` : state);
        this.state.dataset.state = state;
    }

    private set(name: FieldName, text: string): void {
        setText(this.values.get(name)!, text);
    }
}
