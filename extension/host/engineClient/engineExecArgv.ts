import os from "node:os";
import {defaultThreads} from "../../../protocol/engineOptions.js";

/**
 * V8 flags for the engine process. Its JavaScript is glue around native calls (a few bookkeeping calls
 * per token), and on a machine with few cores V8's optimizing compilers, which compile on background
 * threads, take CPU from llama.cpp's compute threads in bursts while the engine warms up: every decode
 * caught by one waits. When llama.cpp's threads, the engine's and the host's main threads leave no core
 * free, the engine runs on V8's interpreter and baseline compiler only (`--no-turbofan --no-maglev`).
 *
 * Measured on the 2-vCPU VM (demo `small` textOnly, 1 thread, 4 sequences, 32 × 48-in / 64-out, process
 * mode, interleaved runs): P99 ITL at max concurrency 1 / 4 on Node 20 was 4.5–5.0 / 9.1–12.7 ms with the
 * defaults and 3.3–4.6 / 6.5–8.4 ms without the optimizing compilers; on Node 24 3.5–3.6 / 9.1–9.3 vs
 * 2.8–2.9 / 6.5–7.5 ms; output throughput unchanged (within ±3 %). Rendering a 7000-token chat prompt
 * with a resolved chat wrapper: median 2.4 ms with the defaults, 3.2 ms without.
 */
export function engineExecArgv(threads: number | undefined, cores = os.availableParallelism()): string[] {
    return leavesNoCoreForCompilers(threads, cores) ? [...noOptimizingCompilers] : [];
}

/** V8's flags that leave a process's JavaScript to its interpreter and baseline compiler. */
export const noOptimizingCompilers = ["--no-turbofan", "--no-maglev"] as const;

/**
 * Whether llama.cpp's compute threads, the engine's and one host process's main threads leave no core for V8's
 * compiler threads: cores < threads + 3. The engine (`engineExecArgv`) and `serve`'s own process
 * (`cli/v8Compilers.ts`) drop the optimizing compilers there.
 */
export function leavesNoCoreForCompilers(threads: number | undefined, cores = os.availableParallelism()): boolean {
    // Without `threads` the engine picks them once it has read the model (defaultThreads): the host counts the small-model
    // default. The answer comes out the same for a large model on machines of up to 4 cores and on ones with SMT; a large
    // model on 5+ cores without SMT keeps V8's optimizing compilers although its threads take every core.
    const computeThreads = threads ?? defaultThreads(cores);
    return cores < computeThreads + 3;
}
