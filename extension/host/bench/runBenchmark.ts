import {nowMs} from "../../../common/clock.js";
import {Xoshiro128} from "../../../common/seededRandom.js";
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {EngineClient} from "../engineClient/engineClient.js";
import type {RequestResult} from "../engineClient/requestState.js";
import type {StatsSession} from "../stats/statsSession.js";
import {computeBenchMetrics, computeClientQueueMetrics, type BenchMetrics, type BenchResult, type ClientQueueMetrics} from "./benchMetrics.js";
import type {BenchOptions} from "./benchOptions.js";
import {OpenAiHttpTarget, type HttpRequestResult, type HttpTargetOptions} from "./openaiHttpTarget.js";
import {ProgressBar} from "./progressBar.js";
import {arrivalTimesS, benchTemperature, lengthBounds, makePrompt, requestLengths, type BenchRequest, type BenchTarget} from "./workload.js";

export type StatsAgreement = {ok: boolean, detail: string};

export type BenchRun = {
    metrics: BenchMetrics,
    /** With a finite --max-concurrency, as vLLM: how long requests waited for a slot. */
    clientQueue?: ClientQueueMetrics,
    results: RequestResult[],
    /** The warm-up requests' results (in no metric). */
    warmups: RequestResult[],
    info: EngineInfo,
    /** With stats on: whether StatsManager's totals equal the client's own counts. */
    statsAgreement?: StatsAgreement
};

export type BenchIo = {
    stderr: (text: string) => void,
    /** Creates the stats pipeline (StatsManager + loggers) for a started client; only called with stats on. */
    createStatsSession: (client: EngineClient, options: BenchOptions) => Promise<StatsSession>
};

/** A workload the engine cannot serve at all, found before anything is sent. */
export class BenchWorkloadError extends Error {
    override readonly name = "BenchWorkloadError";
}

/** Refuses a workload whose requests cannot fit one sequence's context: each would fail, so say why up front. */
function checkFitsContext(options: BenchOptions, info: EngineInfo): void {
    const inputLen = lengthBounds(options.inputLen, options.rangeRatio).high;
    const outputLen = lengthBounds(options.outputLen, options.rangeRatio, 1).high;
    const needs = options.prefixLen + inputLen + outputLen;
    const parts = options.rangeRatio > 0
        ? `the longest input ${inputLen} + output ${outputLen} at --random-range-ratio ${options.rangeRatio}`
        : `--input-len ${inputLen} + --output-len ${outputLen}`;
    if (needs > info.contextSize)
        throw new BenchWorkloadError(`each request needs about ${needs} tokens (--prefix-len ${options.prefixLen} + ${parts}), ` +
            `but the engine's context holds ${info.contextSize} tokens per sequence (--context-size)`);
}

/** Mixed into the seed of the request-length stream (any constant: it only has to differ from the prompts' stream). */
const lengthSeedSalt = 0x2545f491;

/** Runs vLLM's serving benchmark shape against our engine and measures it client-side. */
export async function runBenchmark(options: BenchOptions, io: BenchIo): Promise<BenchRun> {
    const client = new EngineClient({
        mode: options.mode,
        parallel: options.parallel,
        prefixCache: options.prefixCache,
        tilePadding: options.tilePadding,
        gpu: options.gpu,
        statsIntervalMs: options.stats ? options.statsIntervalMs : 0,
        demoModelSize: options.demoModelSize,
        ...(options.modelPath !== undefined ? {modelPath: options.modelPath} : {}),
        ...(options.threads !== undefined ? {threads: options.threads} : {}),
        ...(options.contextSize !== undefined ? {contextSize: options.contextSize} : {}),
        ...(options.prefillChunkTokens !== undefined ? {prefillChunkTokens: options.prefillChunkTokens} : {}),
        ...(options.promptCacheMiB !== undefined ? {promptCacheMiB: options.promptCacheMiB} : {}),
        ...(options.loraAdapters !== undefined ? {loraAdapters: options.loraAdapters} : {})
    });
    const info = await client.start();
    let session: StatsSession | undefined;
    try {
        checkFitsContext(options, info);
        if (options.stats)
            session = await io.createStatsSession(client, options);
        const workload = await runWithProgress(engineTarget(client), options, io);
        const {results, warmups} = workload;
        const run: BenchRun = {...measure(workload, options), results, warmups, info};
        if (session !== undefined)
            run.statsAgreement = checkAgreement(session, results, warmups);
        return run;
    } finally {
        await session?.dispose();
        await client.stop();
    }
}

export type HttpBenchRun = {
    metrics: BenchMetrics,
    /** With a finite --max-concurrency, as vLLM: how long requests waited for a slot. */
    clientQueue?: ClientQueueMetrics,
    results: HttpRequestResult[],
    target: OpenAiHttpTarget
};

/**
 * The same benchmark against an OpenAI-compatible server over HTTP (`bench --base-url`): no engine is
 * started; the server's stats are its own business. Throws BenchTargetError when the server cannot be
 * used at all (unreachable, no model list); failed requests are counted, their messages in `results`.
 */
export async function runHttpBenchmark(options: BenchOptions, http: HttpTargetOptions,
                                       io: Pick<BenchIo, "stderr">): Promise<HttpBenchRun> {
    const target = await OpenAiHttpTarget.connect(http);
    try {
        const workload = await runWithProgress(target, options, io);
        return {...measure(workload, options), results: workload.results, target};
    } finally {
        target.close();
    }
}

/** vLLM's metrics of a run; client-side queueing only with a concurrency limit, as vLLM reports it. */
function measure(run: WorkloadRun<BenchResult>, options: BenchOptions): {metrics: BenchMetrics, clientQueue?: ClientQueueMetrics} {
    const metrics = computeBenchMetrics(run.results, run.durationS);
    if (!Number.isFinite(options.maxConcurrency))
        return {metrics};
    return {metrics, clientQueue: computeClientQueueMetrics(run.results, run.arrivalsMs)};
}

async function runWithProgress<Result extends BenchResult>(target: BenchTarget<Result>, options: BenchOptions,
                                                           io: Pick<BenchIo, "stderr">): Promise<WorkloadRun<Result>> {
    const progress = options.progress ? new ProgressBar(options.numPrompts, io.stderr) : undefined;
    const run = await runWorkloadOn(target, options, (done) => progress?.update(done));
    progress?.finish();
    return run;
}

/**
 * A workload's measured requests in arrival order: their results, when each arrived by the schedule
 * (`arrivalsMs`, nowMs clock; its result's `arrival` is when it was sent, later when it waited for a
 * slot), and the wall time from the start of the schedule to the last finish. `warmups`: the results
 * of the warm-up requests sent before it, in no metric.
 */
export type WorkloadRun<Result extends BenchResult> = {results: Result[], arrivalsMs: number[], durationS: number, warmups: Result[]};

/** What a workload sends: vLLM's random dataset shape. */
export type Workload = Pick<BenchOptions, "numPrompts" | "inputLen" | "outputLen" | "maxConcurrency" | "requestRate" | "seed"> &
    Partial<Pick<BenchOptions, "prefixLen" | "numWarmups" | "rangeRatio">>;

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

/** At most `size` holders at once (Infinity: no limit); the others wait in arrival order, like asyncio.Semaphore. */
class Slots {
    private readonly waiting: Array<() => void> = [];

    constructor(private free: number) {}

    async acquire(): Promise<void> {
        if (this.free > 0) {
            this.free--;
            return;
        }
        await new Promise<void>((resolve) => this.waiting.push(resolve));
    }

    release(): void {
        const next = this.waiting.shift();
        if (next !== undefined)
            next();
        else
            this.free++;
    }
}

/** Resolves at `atMs` (nowMs clock), or as soon as `signal` aborts. */
function sleepUntil(atMs: number, signal?: AbortSignal): Promise<void> {
    const delay = atMs - nowMs();
    if (delay <= 0 || signal?.aborted === true)
        return Promise.resolve();
    return new Promise((resolve) => {
        const onAbort = () => {
            clearTimeout(timer);
            resolve();
        };
        const timer = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
        }, delay);
        signal?.addEventListener("abort", onAbort, {once: true});
    });
}

/**
 * Sends a workload to a target, the scheduling of vLLM's serving benchmark: seeded prompts; first
 * `numWarmups` copies of the first request (at most `maxConcurrency` at once, as vLLM's warm-up),
 * then the measured requests on their Poisson schedule (`arrivalTimesS`: the first at 0, all at once
 * at an infinite rate), which waiting for a slot never delays; each arrived request waits for one of
 * `maxConcurrency` slots, then is sent (its latencies count from there). Exact output lengths
 * (ignore_eos; each request's own with `rangeRatio`), request i seeded `seed + i`. After `signal`
 * aborts, nothing more is sent and what is in flight is cancelled.
 */
export async function runWorkloadOn<Result extends BenchResult>(
    target: BenchTarget<Result>, workload: Workload, onProgress?: (done: number) => void, signal?: AbortSignal
): Promise<WorkloadRun<Result>> {
    const rng = new Xoshiro128(workload.seed);
    const prefixLen = workload.prefixLen ?? 0;
    const prefix = prefixLen > 0 ? `${makePrompt(rng, prefixLen)} ` : "";
    // Lengths from a stream of their own (untouched at R = 0): without a range ratio, a seed's prompts and arrivals stay as they were.
    const lengthRng = new Xoshiro128(workload.seed ^ lengthSeedSalt);
    const lengths = requestLengths(lengthRng, workload.numPrompts, workload.inputLen, workload.outputLen, workload.rangeRatio ?? 0);
    const prompts = lengths.map(({inputLen}) => prefix + makePrompt(rng, inputLen));
    const schedule = arrivalTimesS(rng, prompts.length, workload.requestRate);
    const request = (i: number): BenchRequest =>
        ({prompt: prompts[i]!, maxTokens: lengths[i]!.outputLen, seed: workload.seed + i, temperature: benchTemperature});
    const slots = new Slots(workload.maxConcurrency);
    const handles = new Set<{cancel(): void}>();
    const cancelAll = () => handles.forEach((handle) => handle.cancel());
    signal?.addEventListener("abort", cancelAll, {once: true});
    /** Waits for a slot, sends, frees the slot when done; undefined when aborted before it was sent. */
    const sendInSlot = async (benchRequest: BenchRequest): Promise<Result | undefined> => {
        await slots.acquire();
        try {
            if (signal?.aborted === true)
                return undefined;
            const handle = target.send(benchRequest);
            handles.add(handle);
            const result = await handle.done;
            handles.delete(handle);
            return result;
        } finally {
            slots.release();
        }
    };
    try {
        const warmups = await Promise.all(Array.from({length: workload.numWarmups ?? 0}, () => sendInSlot(request(0))));
        let done = 0;
        const pending: Array<Promise<{result: Result | undefined, arrivedMs: number}>> = [];
        const started = nowMs();
        for (let i = 0; i < prompts.length; i++) {
            await sleepUntil(started + schedule[i]! * 1000, signal);
            if (signal?.aborted === true)
                break;
            const arrivedMs = nowMs();
            pending.push(sendInSlot(request(i)).then((result) => {
                if (result !== undefined)
                    onProgress?.(++done);
                return {result, arrivedMs};
            }));
        }
        const sent = (await Promise.all(pending)).flatMap(({result, arrivedMs}) => result !== undefined ? [{result, arrivedMs}] : []);
        return {
            results: sent.map((s) => s.result), arrivalsMs: sent.map((s) => s.arrivedMs), durationS: (nowMs() - started) / 1000,
            warmups: warmups.filter((result) => result !== undefined)
        };
    } finally {
        signal?.removeEventListener("abort", cancelAll);
    }
}

/**
 * StatsManager is the source of truth for the panel: its totals must equal what the client counted,
 * warm-up requests included (the engine served them too). Generated tokens are the client's own
 * count, the tokens it received in the stream, not the count on the same `finished` event the stats
 * read, so a miscounted event cannot agree with itself.
 */
function checkAgreement(session: StatsSession, results: RequestResult[], warmups: RequestResult[]): StatsAgreement {
    const totals = session.totals();
    const all = [...warmups, ...results];
    const expected = {
        promptTokens: all.reduce((sum, r) => sum + r.promptTokens, 0),
        generationTokens: all.reduce((sum, r) => sum + r.deliveries.reduce((delivered, d) => delivered + d.tokens, 0), 0),
        finished: all.length
    };
    const mismatches = (Object.keys(expected) as Array<keyof typeof expected>)
        .filter((key) => totals[key] !== expected[key])
        .map((key) => `${key}: stats ${totals[key]} vs client ${expected[key]}`);
    return mismatches.length === 0
        ? {ok: true, detail: `stats totals agree with the client: ${expected.finished} requests${warmups.length > 0 ? ` (${warmups.length} of them warm-ups)` : ""}, ` +
            `${expected.promptTokens} prompt and ${expected.generationTokens} generated tokens`}
        : {ok: false, detail: `stats totals DISAGREE with the client: ${mismatches.join("; ")}`};
}
