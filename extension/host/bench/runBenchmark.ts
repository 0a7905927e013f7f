import {Xoshiro128} from "../../../common/seededRandom.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {EngineClient} from "../engineClient/engineClient.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {StatsSession} from "../stats/statsSession.js";
import {computeBenchMetrics, type BenchMetrics, type BenchResult} from "./benchMetrics.js";
import type {BenchOptions} from "./benchOptions.js";
import {OpenAiHttpTarget, type HttpRequestResult, type HttpTargetOptions} from "./openaiHttpTarget.js";
import {ProgressBar} from "./progressBar.js";
import {benchTemperature, makePrompt, nextArrivalGapS, type BenchTarget} from "./workload.js";

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
        prefixCache: options.prefixCache,
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
        const {results, durationS} = await runWithProgress(engineTarget(client), options, io);
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

export type HttpBenchRun = {metrics: BenchMetrics, results: HttpRequestResult[], target: OpenAiHttpTarget};

/**
 * The same benchmark against an OpenAI-compatible server over HTTP (`bench --base-url`): no engine is
 * started; the server's stats are its own business. Throws BenchTargetError when the server cannot be
 * used at all (unreachable, no model list); failed requests are counted, their messages in `results`.
 */
export async function runHttpBenchmark(options: BenchOptions, http: HttpTargetOptions,
                                       io: Pick<BenchIo, "stderr">): Promise<HttpBenchRun> {
    const target = await OpenAiHttpTarget.connect(http);
    const {results, durationS} = await runWithProgress(target, options, io);
    return {metrics: computeBenchMetrics(results, durationS), results, target};
}

async function runWithProgress<Result extends BenchResult>(target: BenchTarget<Result>, options: BenchOptions,
                                                           io: Pick<BenchIo, "stderr">): Promise<WorkloadRun<Result>> {
    const progress = options.progress ? new ProgressBar(options.numPrompts, io.stderr) : undefined;
    const run = await runWorkloadOn(target, options, (done) => progress?.update(done));
    progress?.finish();
    return run;
}

/** A workload's results in sending order, and its wall time from the first send to the last finish. */
export type WorkloadRun<Result extends BenchResult> = {results: Result[], durationS: number};

/** What a workload sends: vLLM's random dataset shape. */
export type Workload = Pick<BenchOptions, "numPrompts" | "inputLen" | "outputLen" | "maxConcurrency" | "requestRate" | "seed"> &
    Partial<Pick<BenchOptions, "prefixLen">>;

/** The engine over IPC as a benchmark target; requests are labelled `bench`. */
export function engineTarget(client: EngineClient): BenchTarget<RequestResult> {
    return {send: (request) => client.generate({...request, ignoreEos: true, client: "bench"})};
}

/**
 * Sends a workload to a started engine (see runWorkloadOn). Used by the CLI bench and by the
 * extension's "Run Benchmark…" (which runs it against the engine the panel is watching).
 */
export async function runWorkload(client: EngineClient, workload: Workload, onProgress?: (done: number) => void,
                                  signal?: AbortSignal): Promise<WorkloadRun<RequestResult>> {
    return await runWorkloadOn(engineTarget(client), workload, onProgress, signal);
}

/**
 * Sends a workload to a target, the scheduling loop of vLLM's `benchmark_serving.py`: seeded prompts,
 * Poisson arrivals (or all at once), at most `maxConcurrency` in flight, exact output lengths
 * (ignore_eos), request i seeded `seed + i`. Results in sending order.
 */
export async function runWorkloadOn<Result extends BenchResult>(
    target: BenchTarget<Result>, workload: Workload, onProgress?: (done: number) => void, signal?: AbortSignal
): Promise<WorkloadRun<Result>> {
    const rng = new Xoshiro128(workload.seed);
    const prefixLen = workload.prefixLen ?? 0;
    const prefix = prefixLen > 0 ? `${makePrompt(rng, prefixLen)} ` : "";
    const prompts = Array.from({length: workload.numPrompts}, () => prefix + makePrompt(rng, workload.inputLen));
    let done = 0;
    let inFlight = 0;
    let slotFreed: (() => void) | undefined;
    const pending: Array<Promise<Result>> = [];
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
        const handle = target.send({prompt: prompts[i]!, maxTokens: workload.outputLen, seed: workload.seed + i,
            temperature: benchTemperature});
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
