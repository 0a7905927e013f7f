/**
 * What the panel shows about the server behind the monitoring proxy: its kind (probed once), whether
 * the last request reached it, and what a client-side measurement cannot see.
 */
import type {TargetKind, TargetStatus, TargetView} from "../../../protocol/targetView.js";

export class ProxyTargetView {
    kind: TargetKind = "openai";
    model: string | null = null;
    private status: TargetStatus = "up";
    private since: number;
    private error: string | null = null;

    constructor(private readonly upstream: string, private readonly now: () => number = Date.now) {
        this.since = now();
    }

    /** A request reached the upstream (true), or could not (false, with why). */
    reached(reachable: boolean, error?: string): void {
        const status: TargetStatus = reachable ? "up" : "unreachable";
        if (status !== this.status)
            this.since = this.now();
        this.status = status;
        this.error = reachable ? null : error ?? "unreachable";
    }

    view(): TargetView {
        return {
            replicas: [{name: this.upstream, url: this.upstream, kind: this.kind, model: this.model, version: null,
                status: this.status, since: this.since, error: this.error, running: null, waiting: null, kvCacheUsage: null,
                vramUsedBytes: null}],
            notReported: ["KV cache use", "prefix cache hits"],
            estimated: {},
            notes: [
                "measured by the monitoring proxy, client-side: TTFT includes the network and the server's queue; queue and prefill times are the server's own and stay blank",
                "running = requests streaming through the proxy, waiting = requests still without their first token"
            ]
        };
    }
}
