/**
 * The kernel ceiling of `bench:peer`: how fast llama.cpp's own kernels run on each side, with no serving
 * loop around them: one sequence, one prompt, then single-token decode steps.
 *
 * - ours: the model loaded exactly as the engine loads it (engine/modelLoader.ts: node-llama-cpp's
 *   prebuilt binaries, same threads and context), timed around node-llama-cpp's `evaluate`, in a process on the
 *   engine's libuv pool size (bench:peer runs itself so: engineThreadpool.ts);
 * - llama-server: the same prompt as token ids on its native `/completion` endpoint (`cache_prompt`
 *   false), timed by llama-server itself (`timings.prompt_per_second`, `timings.predicted_per_second`).
 *
 * Both sample as the serving benchmark does (temperature 0.8, top-k 40, top-p 0.95, min-p 0: node-llama-cpp's
 * defaults, set explicitly on llama-server), so a decode step here costs what one costs there, sampling included.
 *
 * Both run the same llama.cpp source at the same commit; what differs is the build (node-llama-cpp's
 * release binaries vs. this machine's compiler). Ours / llama-server here is the most any serving loop on
 * top of these binaries can reach against llama-server, so the serving ratios read against it.
 */
import {nowMs} from "../common/clock.js";
import {loadModel} from "../engine/modelLoader.js";
import {isObject} from "../protocol/validation.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {startLlamaServer} from "./llamaServer.js";

export type KernelRates = {prefill_tok_s: number, decode_tok_s: number};

export type KernelCeiling = {
    prompt_tokens: number,
    output_tokens: number,
    repeats: number,
    threads: number,
    /** Medians over the repeats. */
    ours: KernelRates,
    llama_server: KernelRates,
    /** ours / llama-server. */
    prefill_ratio: number,
    decode_ratio: number
};

export type KernelCeilingOptions = {
    /** llama-server binary (built from node-llama-cpp's bundled llama.cpp source). */
    binary: string,
    modelPath: string,
    threads: number,
    /** Text whose first `promptTokens` tokens (the model's tokenizer) are the prompt. */
    text: string,
    promptTokens: number,
    outputTokens: number,
    repeats: number,
    /** The serving benchmark's temperature. */
    temperature: number
};

/** Measures both sides, interleaved (the side that goes first alternates), after one unmeasured warm-up each. */
export async function measureKernelCeiling(options: KernelCeilingOptions): Promise<KernelCeiling> {
    const loaded = await loadModel({modelPath: options.modelPath, threads: options.threads, parallel: 1, contextSize: 4096,
        prefixCache: false}, () => undefined);
    const server = await startLlamaServer({binary: options.binary, model: options.modelPath,
        args: ["-t", String(options.threads), "-tb", String(options.threads), "-np", "1", "-c", "4096", "-fa", "auto", "--no-webui"]});
    try {
        const prompt = loaded.model.tokenize(options.text).slice(0, options.promptTokens);
        if (prompt.length < options.promptTokens)
            throw new Error(`the text makes ${prompt.length} tokens, fewer than the ${options.promptTokens} asked for`);
        const sequence = loaded.context.getSequence();
        const oursOnce = async (): Promise<KernelRates> => {
            await sequence.clearHistory();
            const start = nowMs();
            let first = 0;
            let last = 0;
            let count = 0;
            for await (const _token of sequence.evaluate(prompt, {temperature: options.temperature, seed: 0, yieldEogToken: true})) {
                last = nowMs();
                if (count === 0)
                    first = last;
                if (++count >= options.outputTokens)
                    break;
            }
            // The first token comes out of the prompt's evaluation (and one sampling), every later one out of a decode step.
            return {prefill_tok_s: prompt.length / ((first - start) / 1000), decode_tok_s: (count - 1) / ((last - first) / 1000)};
        };
        const llamaOnce = async (): Promise<KernelRates> => {
            const response = await fetch(`${server.origin}/completion`, {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({prompt, n_predict: options.outputTokens, ignore_eos: true, cache_prompt: false,
                    temperature: options.temperature, top_k: 40, top_p: 0.95, min_p: 0, seed: 0})});
            const body: unknown = await response.json();
            if (!response.ok || !isObject(body) || !isObject(body.timings))
                throw new Error(`llama-server /completion: HTTP ${response.status} ${JSON.stringify(body).slice(0, 300)}`);
            const {prompt_n: promptN, prompt_per_second: prefill, predicted_per_second: decode} = body.timings;
            if (promptN !== prompt.length || typeof prefill !== "number" || typeof decode !== "number")
                throw new Error(`llama-server evaluated ${String(promptN)} prompt tokens (sent ${prompt.length}): ${JSON.stringify(body.timings)}`);
            return {prefill_tok_s: prefill, decode_tok_s: decode};
        };
        await oursOnce();
        await llamaOnce();
        const ours: KernelRates[] = [];
        const llama: KernelRates[] = [];
        for (let i = 0; i < options.repeats; i++) {
            if (i % 2 === 0) {
                ours.push(await oursOnce());
                llama.push(await llamaOnce());
            } else {
                llama.push(await llamaOnce());
                ours.push(await oursOnce());
            }
        }
        const median = (rates: KernelRates[]): KernelRates => ({prefill_tok_s: percentile(rates.map((r) => r.prefill_tok_s), 50),
            decode_tok_s: percentile(rates.map((r) => r.decode_tok_s), 50)});
        const oursMedian = median(ours);
        const llamaMedian = median(llama);
        return {prompt_tokens: prompt.length, output_tokens: options.outputTokens, repeats: options.repeats, threads: options.threads,
            ours: oursMedian, llama_server: llamaMedian,
            prefill_ratio: oursMedian.prefill_tok_s / llamaMedian.prefill_tok_s,
            decode_ratio: oursMedian.decode_tok_s / llamaMedian.decode_tok_s};
    } finally {
        await server.stop();
        await loaded.context.dispose();
        await loaded.model.dispose();
        await loaded.llama.dispose();
    }
}

/** One line for the report. */
export function describeKernelCeiling(ceiling: KernelCeiling): string {
    const rate = (value: number): string => `${value.toFixed(0)} tok/s`;
    return `kernel ceiling (1 sequence, ${ceiling.prompt_tokens}-token prompt, ${ceiling.output_tokens} tokens, ${ceiling.threads} thread, ` +
        `medians of ${ceiling.repeats}): prefill ours ${rate(ceiling.ours.prefill_tok_s)} vs llama-server ${rate(ceiling.llama_server.prefill_tok_s)} ` +
        `(${ceiling.prefill_ratio.toFixed(3)}), decode ours ${rate(ceiling.ours.decode_tok_s)} vs llama-server ` +
        `${rate(ceiling.llama_server.decode_tok_s)} (${ceiling.decode_ratio.toFixed(3)})`;
}
