/**
 * Watched servers (issue G): what a view shows when its numbers come from servers it polls —
 * llama.cpp's server, vLLM, Ollama — instead of our own engine. Part of StatsSnapshotView/StatsDelta.
 */
import type {HistogramMetric} from "./statsView.js";

/** `openai`: a server that only speaks the OpenAI API (LM Studio, …), seen through the monitoring proxy. */
export const targetKinds = ["llamacpp", "vllm", "ollama", "openai"] as const;
export type TargetKind = typeof targetKinds[number];

/** What the panel, the pickers and the log call each kind. */
export const targetKindNames: Record<TargetKind, string> = {
    llamacpp: "llama.cpp server", vllm: "vLLM", ollama: "Ollama", openai: "OpenAI-compatible server"
};

/** `connecting` until the first answer; `unauthorized` = 401/403; `error` = it answers, but not what its kind serves. */
export const targetStatuses = ["connecting", "up", "unreachable", "unauthorized", "error"] as const;
export type TargetStatus = typeof targetStatuses[number];

/** One server (a replica, or one data-parallel rank of a vLLM server). */
export type TargetReplicaView = {
    /** What it is called in the panel: its URL, plus `#engine` for a vLLM rank. */
    name: string,
    url: string,
    kind: TargetKind,
    model: string | null,
    version: string | null,
    status: TargetStatus,
    /** Since when (epoch ms) the status has been what it is. */
    since: number,
    /** What went wrong, for the statuses that are not `up`/`connecting`. */
    error: string | null,
    running: number | null,
    waiting: number | null,
    /** 0..1 */
    kvCacheUsage: number | null,
    /** GPU memory the server says it uses (Ollama's loaded models' `size_vram`), when it says. */
    vramUsedBytes: number | null,
    /** Its slots (llama.cpp's `/slots`), when it lists them; absent otherwise. */
    slots?: TargetSlotView[]
};

/** One slot of a watched server: busy or not, and the tokens it holds of its context. */
export type TargetSlotView = {processing: boolean, tokens: number, contextSize: number};

/** Percentiles (seconds, or tokens for the lengths) estimated from a server's histogram buckets. */
export type EstimatedPercentiles = {count: number, mean: number | null, p50: number | null, p90: number | null, p99: number | null};

export type TargetView = {
    replicas: TargetReplicaView[],
    /**
     * What the servers do not report, in words ("time to first token", "requests waiting"): the panel
     * shows "not reported" there rather than a 0.
     */
    notReported: string[],
    /**
     * For the latency and length metrics the servers export as Prometheus histograms: estimates over
     * the percentile window, by linear interpolation inside the bucket (PromQL's `histogram_quantile`),
     * replicas merged bucket-wise. The panel marks them "≈ from buckets".
     */
    estimated: Partial<Record<HistogramMetric, EstimatedPercentiles>>,
    /** Anything else a user should know about these numbers (e.g. "generation tokens count at each request's end"). */
    notes: string[]
};
