/**
 * The header: model, backend, GPU, VRAM, context size, sequences, prefix cache on/off (and the prompt cache's size), chunked
 * prefill's budget, engine state ("stalled for 3.2 s" while stalled) and uptime; while an engine loads, "loading…" with the model
 * before it, and no uptime. Each value element carries `data-field="<name>"`. Watching servers (`target`), it names
 * their models and kinds instead, lists each server with its state ("unreachable since 12:03:04"), and shows what the
 * numbers cannot say (`data-field="notes"`); for our engine, the notes name a GPU backend it skipped for failing the
 * self-test, and why.
 */
import {el, setText} from "./dom.js";
import {formatBytes, formatDuration, formatNumber, formatParams, formatPrefixCache} from "../common/format.js";
import {targetKindNames, type TargetView} from "../protocol/targetView.js";
import type {StatsStore} from "./store.js";
import {backendNames, describeGpuFallback} from "../common/gpuBackendText.js";

const fields = [
    ["model", "Model"], ["backend", "Backend"], ["gpu", "GPU"], ["vram", "VRAM"], ["context", "Context"],
    ["sequences", "Sequences"], ["prefixCache", "Prefix cache"], ["prefillChunk", "Prefill chunk"],
    ["uptime", "Uptime"], ["servers", "Servers"]
] as const;
type FieldName = typeof fields[number][0];


export class Header {
    readonly element = el("header", "header");
    private readonly state = el("span", "state-badge");
    private readonly values = new Map<FieldName, HTMLElement>();
    private readonly notes = el("p", "header-notes");
    /** The title row (name and state), where the source picker goes. */
    readonly titleElement = el("div", "header-title");

    constructor() {
        const title = this.titleElement;
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
        this.notes.dataset.field = "notes";
        this.element.append(title, list, this.notes);
    }

    /** `hostNow`: the host clock now (store time plus the time since it arrived). */
    update(store: StatsStore, hostNow: number): void {
        if (!store.hasData)
            return;
        const {engine, state, gauges, target} = store.view;
        setText(this.state, state === "stalled" ? `stalled for ${formatDuration(gauges.msSinceLastStep)}` : state);
        this.state.dataset.state = state;
        this.values.get("servers")!.parentElement!.hidden = target === null;
        const loading = state === "loading";
        if (target !== null) {
            this.showTarget(target, gauges.vramUsedBytes);
            return;
        }
        // A GPU backend the engine skipped (it failed the self-test) is said here, with the reason.
        setText(this.notes, engine === null || loading ? "" : engine.gpuFallbacks.map((fallback) => `${describeGpuFallback(fallback, engine.backend)}.`).join(" "));
        // While an engine loads, `engine` still describes the one before it (the new one is known at ready).
        const described = engine === null ? undefined : `${engine.model.name} (${engine.model.quantization}, ${formatParams(engine.model.parameterCount)} params)`;
        this.set("model", described === undefined ? loading ? "loading…" : "no model" : loading ? `loading… (before: ${described})` : described);
        this.set("backend", engine === null ? "–" : backendNames[engine.backend]);
        this.set("gpu", engine === null ? "–" : engine.gpuDevices.length === 0 ? "none" : engine.gpuDevices.join(", "));
        const vramTotal = gauges.vramTotalBytes || engine?.vramTotalBytes || 0;
        this.set("vram", vramTotal > 0 ? `${formatBytes(gauges.vramUsedBytes)} / ${formatBytes(vramTotal)}` : "–");
        this.set("context", engine === null ? "–" : `${formatNumber(engine.contextSize)} tokens`);
        this.set("sequences", engine === null ? "–" : formatNumber(engine.parallel));
        this.set("prefixCache", engine === null ? "–" : formatPrefixCache(engine));
        this.set("prefillChunk", engine === null ? "–" : `${formatNumber(engine.prefillChunkTokens)} tokens/step`);
        const startedAt = store.engineStartedAt;
        this.set("uptime", startedAt === undefined || loading ? "–" : formatDuration(hostNow - startedAt));
    }

    private showTarget(target: TargetView, vramUsed: number): void {
        const replicas = target.replicas;
        const distinct = (values: Array<string | null>) => [...new Set(values.filter((v): v is string => v !== null))];
        this.set("model", distinct(replicas.map((r) => r.model)).join(", ") || "–");
        this.set("backend", distinct(replicas.map((r) => targetKindNames[r.kind] + (r.version !== null ? ` ${r.version}` : ""))).join(", "));
        this.set("gpu", "–");
        const serversVram = replicas.reduce((sum, r) => sum + (r.status === "up" ? r.vramUsedBytes ?? 0 : 0), 0);
        const used = Math.max(vramUsed, serversVram);
        this.set("vram", used > 0 ? `${formatBytes(used)} used` : "–");
        this.set("context", "–");
        this.set("sequences", "–");
        this.set("prefixCache", "–");
        this.set("prefillChunk", "–");
        this.set("uptime", "–");
        this.set("servers", replicas.map((r) => {
            if (r.status === "connecting")
                return `${r.name} connecting`;
            if (r.status !== "up")
                return `${r.name} ${r.status} since ${new Date(r.since).toLocaleTimeString()}${r.error !== null ? ` (${r.error})` : ""}`;
            const numbers = [
                ...(r.running !== null ? [`${formatNumber(r.running)} running`] : []),
                ...(r.waiting !== null ? [`${formatNumber(r.waiting)} waiting`] : []),
                ...(r.kvCacheUsage !== null ? [`KV ${formatNumber(r.kvCacheUsage * 100)}%`] : [])
            ];
            return `${r.name} up${replicas.length > 1 && numbers.length > 0 ? ` (${numbers.join(", ")})` : ""}`;
        }).join(" · "));
        setText(this.notes, [
            ...(target.notReported.length > 0 ? [`Not reported by the server${replicas.length > 1 ? "s" : ""}: ${target.notReported.join(", ")}.`] : []),
            ...target.notes
        ].join(" "));
    }

    private set(name: FieldName, text: string): void {
        setText(this.values.get(name)!, text);
    }
}
