/**
 * The proxy's requests as StatsManager sees an engine's: each proxied generation request is a
 * lifecycle (OutputProcessor, the same one EngineClient uses) built from what passes the proxy —
 * arrival, each piece of streamed text (one token per chunk, as vLLM's benchmark counts them), the
 * end with the server's own counts. Queue and prefill times are the server's secret: they stay unset
 * (not 0). Running = requests streaming, waiting = requests without their first token yet.
 */
import type {FinishReason, RequestErrorCode} from "../../../protocol/engineMessages.js";
import type {EngineStep} from "../engineClient/engineStep.js";
import {OutputProcessor} from "../engineClient/outputProcessor.js";

export interface ProxyStatsSink {
    onOutputs(step: EngineStep): void
}

export type ProxiedEnd = {
    reason: FinishReason,
    /** The server's counts (usage, Ollama's eval counts); undefined when it gave none. */
    promptTokens: number | undefined,
    completionTokens: number | undefined,
    error?: string,
    errorCode?: RequestErrorCode
};

export class ProxyStats {
    private readonly processor = new OutputProcessor();
    /** Text chunks counted so far, per request in flight. */
    private readonly chunks = new Map<string, number>();
    private nextId = 0;

    constructor(private readonly sink: ProxyStatsSink, private readonly now: () => number = Date.now) {}

    get inFlight(): number {
        return this.chunks.size;
    }

    arrive(client: string): string {
        const id = `proxy-${this.nextId++}`;
        this.chunks.set(id, 0);
        this.emit(this.processor.arrive(id, client, this.now(), 0, 0));
        return id;
    }

    text(id: string, text: string): void {
        const count = this.chunks.get(id);
        if (count === undefined)
            return;
        this.chunks.set(id, count + 1);
        const t = this.now();
        this.emit(this.processor.process([{kind: "tokens", id, text, times: [t]}], undefined, 0, t).step);
    }

    finish(id: string, end: ProxiedEnd): void {
        const counted = this.chunks.get(id);
        if (counted === undefined)
            return;
        this.chunks.delete(id);
        const t = this.now();
        const generated = end.completionTokens ?? counted;
        const {step} = this.processor.process([{
            kind: "finished", id, t, reason: end.reason, promptTokens: end.promptTokens ?? 0, generatedTokens: generated,
            ...(end.error !== undefined ? {error: end.error, errorCode: end.errorCode ?? "engine_error"} : {})
        }], undefined, 0, t);
        // Prompt tokens are known only now (at the first token the lifecycle had 0), and a server may pack
        // several tokens in one chunk: its own count completes the totals.
        step.iteration.promptTokens += end.promptTokens ?? 0;
        step.iteration.generationTokens += Math.max(0, generated - counted);
        this.emit(step);
    }

    private emit(step: EngineStep): void {
        let running = 0;
        let waiting = 0;
        for (const id of this.chunks.keys()) {
            if ((this.chunks.get(id) ?? 0) > 0) running++;
            else waiting++;
        }
        step.scheduler = {t: step.iteration.t, running, waiting, stepTokens: step.iteration.generationTokens + step.iteration.promptTokens,
            kvUsedTokens: 0, kvCapacityTokens: 0};
        this.sink.onOutputs(step);
    }
}
