import type {LlamaContext} from "../../engine/llamaTypes.js";

/**
 * Records the token count of every batch node-llama-cpp hands to llama.cpp on `context` (its native `initBatch`,
 * shadowed on the instance as engine/sampleAhead.ts does), into the returned array, which the caller may clear.
 */
export function recordBatchSizes(context: LlamaContext): number[] {
    const sizes: number[] = [];
    const native = (context as unknown as {_ctx: {initBatch: (size: number) => void}})._ctx;
    const initBatch = native.initBatch;
    Object.defineProperty(native, "initBatch", {configurable: true, value: (size: number) => {
        sizes.push(size);
        initBatch.call(native, size);
    }});
    return sizes;
}
