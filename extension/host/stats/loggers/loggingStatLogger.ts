import {nowMs} from "../../../../common/clock.js";
import type {EngineInfo} from "../../../../protocol/engineMessages.js";
import type {IterationStats} from "../../engineClient/engineStep.js";
import {CachingMetrics} from "../cachingMetrics.js";
import type {EngineGaugeValues, StatLogger} from "./statLogger.js";

export type LoggingStatLoggerOptions = {
    /** Where each line goes (an output channel, stdout). Required. */
    write: (line: string) => void,
    /** Seconds between lines (vLLM's `VLLM_LOG_STATS_INTERVAL`). Default 10. */
    logIntervalS?: number,
    /** The engine's index in the prefix `Engine 000:`. Default 0. */
    engineIndex?: number,
    /** Clock for the start of the first interval, epoch ms. Default `nowMs`. */
    now?: () => number,
    /** Requests the prefix-cache hit rate is taken over (vLLM's CachingMetrics). Default 1000, as vLLM. */
    prefixCacheWindowRequests?: number
};

/**
 * vLLM's periodic log line, every `logIntervalS`:
 * `Engine 000: Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, Running: N reqs, Waiting: M reqs,
 * GPU KV cache usage: Z%, Prefix cache hit rate: H%` and, with a prompt cache (vLLM: with a KV connector),
 * `, External prefix cache hit rate: E%`
 * (`KV cache usage` on the CPU backend). Throughputs are the tokens recorded in the interval over its
 * length. The hit rate is not per interval: as vLLM's, it is cached tokens / prompt tokens looked up
 * over the most recent 1000 requests (CachingMetrics), 0.0% before any lookup; `reset` clears it.
 * Quiet when idle: no line when the interval and the one before it had no tokens and nothing
 * running or waiting — so the interval in which activity stopped is still reported, once.
 */
export class LoggingStatLogger implements StatLogger {
    private readonly write: (line: string) => void;
    private readonly intervalMs: number;
    private readonly prefix: string;
    private lastLogAt: number;
    private promptTokens = 0;
    private generationTokens = 0;
    private cpu = false;
    private lastActive = false;
    private readonly prefixCache: CachingMetrics;
    private readonly externalPrefixCache: CachingMetrics;
    /** Whether the engine has a prompt cache: the line then ends with its hit rate, as vLLM's does with a KV connector's. */
    private promptCache = false;

    constructor(options: LoggingStatLoggerOptions) {
        const intervalS = options.logIntervalS ?? 10;
        if (!(intervalS > 0))
            throw new RangeError(`logIntervalS must be > 0, got ${intervalS}`);
        this.write = options.write;
        this.intervalMs = intervalS * 1000;
        this.prefix = `Engine ${String(options.engineIndex ?? 0).padStart(3, "0")}: `;
        this.lastLogAt = (options.now ?? nowMs)();
        this.prefixCache = new CachingMetrics(options.prefixCacheWindowRequests);
        this.externalPrefixCache = new CachingMetrics(options.prefixCacheWindowRequests);
    }

    recordEngine(info: EngineInfo, _maxModelLen: number): void {
        this.cpu = info.backend === "cpu";
        this.promptCache = info.promptCacheMiB > 0;
    }

    record(_scheduler: unknown, iteration: IterationStats): void {
        this.promptTokens += iteration.promptTokens;
        this.generationTokens += iteration.generationTokens;
        this.prefixCache.observe(iteration.prefixCacheRequests, iteration.prefixCacheQueries, iteration.prefixCacheHits);
        this.externalPrefixCache.observe(iteration.externalPrefixCacheRequests, iteration.externalPrefixCacheQueries,
            iteration.externalPrefixCacheHits);
    }

    recordRejected(): void {}

    reset(now: number): void {
        this.promptTokens = 0;
        this.generationTokens = 0;
        this.prefixCache.reset();
        this.externalPrefixCache.reset();
        this.lastLogAt = now;
    }

    log(now: number, gauges: EngineGaugeValues): void {
        const elapsedMs = now - this.lastLogAt;
        if (elapsedMs < this.intervalMs)
            return;
        const line = this.formatLine(elapsedMs, gauges);
        const active = this.promptTokens > 0 || this.generationTokens > 0 || gauges.running > 0 || gauges.waiting > 0;
        this.promptTokens = 0;
        this.generationTokens = 0;
        this.lastLogAt = now;
        if (active || this.lastActive)
            this.write(line);
        this.lastActive = active;
    }

    dispose(): void {}

    private formatLine(elapsedMs: number, gauges: EngineGaugeValues): string {
        const seconds = elapsedMs / 1000;
        const promptThroughput = this.promptTokens / seconds;
        const generationThroughput = this.generationTokens / seconds;
        return `${this.prefix}Avg prompt throughput: ${promptThroughput.toFixed(1)} tokens/s, ` +
            `Avg generation throughput: ${generationThroughput.toFixed(1)} tokens/s, ` +
            `Running: ${gauges.running} reqs, Waiting: ${gauges.waiting} reqs, ` +
            `${this.cpu ? "KV cache usage" : "GPU KV cache usage"}: ${(gauges.kvCacheUsage * 100).toFixed(1)}%, ` +
            `Prefix cache hit rate: ${(this.prefixCache.hitRate * 100).toFixed(1)}%` +
            (this.promptCache ? `, External prefix cache hit rate: ${(this.externalPrefixCache.hitRate * 100).toFixed(1)}%` : "");
    }
}
