import {Xoshiro128, nextUnit} from "../../../common/seededRandom.js";
import type {BenchResult} from "./benchMetrics.js";

/**
 * The sampling temperature of every benchmark request: the engine's default, sent explicitly so that a
 * server with another default (vLLM 1.0) samples the same way.
 */
export const benchTemperature = 0.8;

/** One benchmark request, whichever target it goes to. Always exactly `maxTokens` tokens (ignore_eos). */
export type BenchRequest = {prompt: string, maxTokens: number, seed: number, temperature: number};

/**
 * Where a workload's requests go: the engine over IPC (`engineTarget` in runBenchmark.ts) or an
 * OpenAI-compatible server over HTTP (`OpenAiHttpTarget`). `done` never rejects: a failure is a result
 * with reason `error` (or `abort` after `cancel`).
 */
export interface BenchTarget<Result extends BenchResult> {
    send(request: BenchRequest): {done: Promise<Result>, cancel(): void}
}

const words = [
    "the", "a", "little", "girl", "boy", "dog", "cat", "sun", "tree", "house", "ran", "saw", "happy", "big", "small",
    "day", "park", "friend", "played", "with", "and", "was", "to", "in", "on", "her", "his", "they", "went", "home",
    "ball", "red", "blue", "sky", "water", "bird", "flew", "over", "under", "said", "hello", "time", "once", "upon", "there"
];

/**
 * A seeded prompt of about `tokens` tokens: common English words, most of which are one token in
 * llama-style vocabularies. Exact prompt token counts come back from the engine and are what the
 * benchmark reports.
 */
export function makePrompt(rng: Xoshiro128, tokens: number): string {
    const parts: string[] = [];
    for (let i = 0; i < tokens; i++)
        parts.push(words[rng.nextUint32() % words.length]!);
    return parts.join(" ");
}

/**
 * The lengths a request may get around `length` with vLLM's `--random-range-ratio` R:
 * [max(min, ⌊length·(1−R)⌋), ⌈length·(1+R)⌉]. R = 0: exactly `length`.
 */
export function lengthBounds(length: number, rangeRatio: number, min = 0): {low: number, high: number} {
    return {low: Math.max(min, Math.floor(length * (1 - rangeRatio))), high: Math.max(min, Math.ceil(length * (1 + rangeRatio)))};
}

/**
 * Each of `count` requests' input and output lengths, uniform integers within `lengthBounds` (output at
 * least 1), as vLLM's random dataset draws them. R = 0 draws nothing: every request gets the lengths as
 * given (and `rng` is left untouched).
 */
export function requestLengths(rng: Xoshiro128, count: number, inputLen: number, outputLen: number,
                               rangeRatio: number): Array<{inputLen: number, outputLen: number}> {
    if (rangeRatio === 0)
        return Array.from({length: count}, () => ({inputLen, outputLen}));
    const input = lengthBounds(inputLen, rangeRatio);
    const output = lengthBounds(outputLen, rangeRatio, 1);
    const draw = ({low, high}: {low: number, high: number}): number => low + Math.floor(nextUnit(rng) * (high - low + 1));
    return Array.from({length: count}, () => ({inputLen: draw(input), outputLen: draw(output)}));
}

/** Seconds until the next Poisson arrival at `rate` per second; 0 when the rate is infinite. */
export function nextArrivalGapS(rng: Xoshiro128, rate: number): number {
    if (!Number.isFinite(rate))
        return 0;
    return -Math.log(1 - nextUnit(rng)) / rate;
}

/**
 * When each of `count` requests arrives, in seconds from the start of the run, as vLLM's serving
 * benchmark schedules them: the first at 0, each next one a Poisson gap (`nextArrivalGapS`) after the
 * one before; all at 0 when the rate is infinite. Fixed in advance: a request that waits for a
 * concurrency slot is sent late, but the arrivals after it keep their times.
 */
export function arrivalTimesS(rng: Xoshiro128, count: number, rate: number): number[] {
    const times: number[] = [];
    let t = 0;
    for (let i = 0; i < count; i++) {
        if (i > 0)
            t += nextArrivalGapS(rng, rate);
        times.push(t);
    }
    return times;
}
