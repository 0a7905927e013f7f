/**
 * A request's seed as llama.cpp's sampler takes it: a uint32 other than 0xFFFFFFFF, which llama.cpp reads as "random".
 * The API's seeds are any integer, as vLLM's; handed over as they are, node-llama-cpp would turn every negative one
 * into 0 (so -1 and -2 sampled alike) and the native side would wrap those past 2^32.
 */
export function samplerSeed(seed: number): number {
    const range = 2 ** 32 - 1;
    return ((seed % range) + range) % range;
}
