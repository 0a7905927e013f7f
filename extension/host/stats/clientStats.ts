/**
 * The per-client breakdown (by `RequestLifecycle.client`) since start or reset: the request ledger,
 * the finished requests' token counts, and TTFT / ITL percentiles of each client's recent values.
 * Bounded: at most `maxClients` labels get a row, later new labels share the "other" row, and each row
 * keeps at most `windowCapacity` TTFTs and ITLs.
 */
import type {FinishReason} from "../../../protocol/engineMessages.js";
import {maxClients, otherClientLabel, type ClientStatsView} from "../../../protocol/statsView.js";
import {quantileOfSorted} from "./percentiles.js";
import {TimedValueWindow} from "./timedValueWindow.js";

/** A client's recent latencies with their p50 / p99, recomputed only when the window's contents changed. */
class LatencyWindow {
    private readonly values: TimedValueWindow;
    private cache: {version: number, first: number, at: number, p50: number | null, p99: number | null} | undefined;

    constructor(capacity: number) {
        this.values = new TimedValueWindow(capacity);
    }

    observe(now: number, value: number): void {
        this.values.push(now, value);
    }

    /** p50 and p99 of the values recorded after `cutoff`; a result younger than `maxAgeMs` is reused. */
    percentiles(now: number, cutoff: number, maxAgeMs: number): [number | null, number | null] {
        const first = this.values.firstIndexAfter(cutoff);
        const cache = this.cache;
        if (cache !== undefined && ((cache.version === this.values.version && cache.first === first) || now - cache.at < maxAgeMs))
            return [cache.p50, cache.p99];
        const sorted = this.values.since(cutoff).sort();
        const p50 = quantileOfSorted(sorted, 0.5);
        const p99 = quantileOfSorted(sorted, 0.99);
        this.cache = {version: this.values.version, first, at: now, p50, p99};
        return [p50, p99];
    }
}

/** One row of the table; StatsManager's ledger entries point at the row their request counts in. */
export class ClientRow {
    arrived = 0;
    inFlight = 0;
    completed = 0;
    failed = 0;
    aborted = 0;
    promptTokens = 0;
    generationTokens = 0;
    readonly ttft: LatencyWindow;
    readonly itl: LatencyWindow;

    constructor(readonly client: string, windowCapacity: number) {
        this.ttft = new LatencyWindow(windowCapacity);
        this.itl = new LatencyWindow(windowCapacity);
    }

    arrive(): void {
        this.arrived++;
        this.inFlight++;
    }

    finish(reason: FinishReason, promptTokens: number, generatedTokens: number): void {
        this.inFlight--;
        if (reason === "error")
            this.failed++;
        else if (reason === "abort")
            this.aborted++;
        else
            this.completed++;
        this.promptTokens += promptTokens;
        this.generationTokens += generatedTokens;
    }

    view(now: number, cutoff: number, maxAgeMs: number): ClientStatsView {
        const [ttftP50S, ttftP99S] = this.ttft.percentiles(now, cutoff, maxAgeMs);
        const [itlP50S, itlP99S] = this.itl.percentiles(now, cutoff, maxAgeMs);
        return {
            client: this.client, arrived: this.arrived, inFlight: this.inFlight, completed: this.completed, failed: this.failed,
            aborted: this.aborted, promptTokens: this.promptTokens, generationTokens: this.generationTokens,
            ttftP50S, ttftP99S, itlP50S, itlP99S
        };
    }
}

export class ClientStatsTable {
    /** By label, in order of first arrival. */
    private readonly rows = new Map<string, ClientRow>();

    constructor(private readonly windowCapacity: number, private readonly windowMs: number) {}

    /** The row a new request of `client` counts in (made on first use; "other" once `maxClients` labels have one). */
    rowFor(client: string): ClientRow {
        const existing = this.rows.get(client);
        if (existing !== undefined)
            return existing;
        const label = this.rows.size < maxClients ? client : otherClientLabel;
        let row = this.rows.get(label);
        if (row === undefined) {
            row = new ClientRow(label, this.windowCapacity);
            this.rows.set(label, row);
        }
        return row;
    }

    /** The row that `client`'s requests count in, if it has one (made by an arrival), without making one. */
    find(client: string): ClientRow | undefined {
        return this.rows.get(client) ?? (this.rows.size >= maxClients ? this.rows.get(otherClientLabel) : undefined);
    }

    views(now: number, maxAgeMs = 0): ClientStatsView[] {
        const cutoff = now - this.windowMs;
        return Array.from(this.rows.values(), (row) => row.view(now, cutoff, maxAgeMs));
    }
}
