import {Xoshiro128} from "../../../engine/seededRandom.js";
import type {EngineInfo} from "../../../engine/protocol/engineMessages.js";
import {EngineClient} from "../engine/engineClient.js";
import type {RequestResult} from "../engine/requestHandle.js";
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
    createStatsSession: (client: EngineClient) => Promise<StatsSession>
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
            session = await io.createStatsSession(client);
        const rng = new Xoshiro128(options.seed);
        const prompts = Array.from({length: options.numPrompts}, () => makePrompt(rng, options.inputLen));
        const progress = options.progress ? new ProgressBar(options.numPrompts, io.stderr) : undefined;
        let done = 0;
        let inFlight = 0;
        let slotFreed: (() => void) | undefined;
        const pending: Array<Promise<RequestResult>> = [];
        const started = performance.now();
        for (let i = 0; i < prompts.length; i++) {
            const gap = nextArrivalGapS(rng, options.requestRate);
            if (gap > 0)
                await new Promise((resolve) => setTimeout(resolve, gap * 1000));
            while (inFlight >= options.maxConcurrency)
                await new Promise<void>((resolve) => {
                    slotFreed = resolve;
                });
            inFlight++;
            const handle = client.generate({prompt: prompts[i]!, maxTokens: options.outputLen, ignoreEos: true, seed: options.seed + i});
            pending.push(handle.done.then((result) => {
                inFlight--;
                done++;
                progress?.update(done);
                const wake = slotFreed;
                slotFreed = undefined;
                wake?.();
                return result;
            }));
        }
        const results = await Promise.all(pending);
        const durationS = (performance.now() - started) / 1000;
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
