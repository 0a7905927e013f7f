import {Xoshiro128} from "../../../common/seededRandom.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {EngineClient} from "../engineClient/engineClient.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {StatsSession} from "../stats/statsSession.js";
import {computeBenchMetrics, type BenchMetrics} from "./benchMetrics.js";
import type {BenchOptions} from "./benchOptions.js";
import {ProgressBar} from "./progressBar.js";
import {makePrompt, nextArrivalGapS} from "./workload.js";

export type StatsAgreement = {ok: boolean, detail: string};

export type BenchRun = {
    metrics: BenchMetrics,
    results: RequestResult[],
    info: EngineInfo,
    /** With stats on: whether StatsManager's totals equal the client's own counts. */
    statsAgreement?: StatsAgreement
};

export type BenchIo = {
    stderr: (text: string) => void,
    /** Creates the stats pipeline (StatsManager + loggers) for a started client; only called with stats on. */
    createStatsSession: (client: EngineClient, options: BenchOptions) => Promise<StatsSession>
};

/** Runs vLLM's serving benchmark shape against our engine and measures it client-side. */
export async function runBenchmark(options: BenchOptions, io: BenchIo): Promise<BenchRun> {
    const client = new EngineClient({
        mode: options.mode,
        parallel: options.parallel,
        statsIntervalMs: options.stats ? options.statsIntervalMs : 0,
        demoModelSize: options.demoModelSize,
        ...(options.modelPath !== undefined ? {modelPath: options.modelPath} : {}),
        ...(options.threads !== undefined ? {threads: options.threads} : {}),
        ...(options.contextSize !== undefined ? {contextSize: options.contextSize} : {})
    });
    const info = await client.start();
    let session: StatsSession | undefined;
    try {
        if (options.stats)
            session = await io.createStatsSession(client, options);
        const progress = options.progress ? new ProgressBar(options.numPrompts, io.stderr) : undefined;
        const {results, durationS} = await runWorkload(client, options, (done) => progress?.update(done));
        progress?.finish();
        const metrics = computeBenchMetrics(results, durationS);
        const run: BenchRun = {metrics, results, info};
        if (session !== undefined)
            run.statsAgreement = checkAgreement(session, results);
        return run;
    } finally {
        await session?.dispose();
        await client.stop();
    }
}

/** What a workload sends: vLLM's random dataset shape. */
export type Workload = Pick<BenchOptions, "numPrompts" | "inputLen" | "outputLen" | "maxConcurrency" | "requestRate" | "seed">;

/**
 * Sends a workload to a started engine: seeded prompts, Poisson arrivals (or all at once), at most
 * `maxConcurrency` in flight, exact output lengths (ignoreEos). Used by the CLI bench and by the
 * extension's "Run Benchmark…" (which runs it against the engine the panel is watching).
 */
export async function runWorkload(client: EngineClient, workload: Workload, onProgress?: (done: number) => void,
                                  signal?: AbortSignal): Promise<{results: RequestResult[], durationS: number}> {
    const rng = new Xoshiro128(workload.seed);
    const prompts = Array.from({length: workload.numPrompts}, () => makePrompt(rng, workload.inputLen));
    let done = 0;
    let inFlight = 0;
    let slotFreed: (() => void) | undefined;
    const pending: Array<Promise<RequestResult>> = [];
    const handles: Array<{cancel(): void}> = [];
    signal?.addEventListener("abort", () => handles.forEach((h) => h.cancel()), {once: true});
    const aborted = () => signal?.aborted === true;
    const started = performance.now();
    for (let i = 0; i < prompts.length && !aborted(); i++) {
        const gap = nextArrivalGapS(rng, workload.requestRate);
        if (gap > 0)
            await new Promise((resolve) => setTimeout(resolve, gap * 1000));
        while (inFlight >= workload.maxConcurrency)
            await new Promise<void>((resolve) => {
                slotFreed = resolve;
            });
        if (aborted())
            break;
        inFlight++;
        const handle = client.generate({prompt: prompts[i]!, maxTokens: workload.outputLen, ignoreEos: true, seed: workload.seed + i, client: "bench"});
        handles.push(handle);
        pending.push(handle.done.then((result) => {
            inFlight--;
            done++;
            onProgress?.(done);
            const wake = slotFreed;
            slotFreed = undefined;
            wake?.();
            return result;
        }));
    }
    const results = await Promise.all(pending);
    return {results, durationS: (performance.now() - started) / 1000};
}

/** StatsManager is the source of truth for the panel: its totals must equal what the client counted. */
function checkAgreement(session: StatsSession, results: RequestResult[]): StatsAgreement {
    const totals = session.totals();
    const expected = {
        promptTokens: results.reduce((sum, r) => sum + r.promptTokens, 0),
        generationTokens: results.reduce((sum, r) => sum + r.generatedTokens, 0),
        finished: results.length
    };
    const mismatches = (Object.keys(expected) as Array<keyof typeof expected>)
        .filter((key) => totals[key] !== expected[key])
        .map((key) => `${key}: stats ${totals[key]} vs client ${expected[key]}`);
    return mismatches.length === 0
        ? {ok: true, detail: `stats totals agree with the client: ${expected.finished} requests, ${expected.promptTokens} prompt and ${expected.generationTokens} generated tokens`}
        : {ok: false, detail: `stats totals DISAGREE with the client: ${mismatches.join("; ")}`};
}
