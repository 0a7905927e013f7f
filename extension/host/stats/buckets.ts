/**
 * Histogram buckets of vLLM V1 (`vllm/v1/metrics/loggers.py`), in seconds for times and tokens for
 * lengths, so that histograms here and on `/metrics` line up with dashboards written for vLLM.
 */

/** `vllm:time_to_first_token_seconds`. */
export const ttftBucketsS: readonly number[] = Object.freeze([
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560
]);

/** `vllm:inter_token_latency_seconds` and `vllm:request_time_per_output_token_seconds`. */
export const tokenLatencyBucketsS: readonly number[] = Object.freeze([
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80
]);

/** e2e, queue, prefill, decode and inference time of a request. */
export const requestLatencyBucketsS: readonly number[] = Object.freeze([
    0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680
]);

/** `vllm:iteration_tokens_total`: tokens evaluated per engine step. */
export const iterationTokensBuckets: readonly number[] = Object.freeze([
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384
]);

/**
 * vLLM's `build_1_2_5_buckets(max_value)`: 1, 2, 5, 10, 20, 50, … up to and including `maxValue`.
 * Used for prompt and generation lengths, with the model's maximum length as `maxValue`.
 */
export function buildOneTwoFiveBuckets(maxValue: number): number[] {
    const buckets: number[] = [];
    for (let power = 1; ; power *= 10) {
        for (const mantissa of [1, 2, 5]) {
            const value = mantissa * power;
            if (value > maxValue)
                return buckets;
            buckets.push(value);
        }
    }
}
