import os from "node:os";
import v8 from "node:v8";
import {leavesNoCoreForCompilers, noOptimizingCompilers} from "../extension/host/engineClient/engineExecArgv.js";

/**
 * Turns V8's optimizing compilers off in this process where the engine's rule turns them off in the engine
 * (`leavesNoCoreForCompilers`), before its JavaScript gets hot; returns whether it did. For `serve`, whose
 * JavaScript (HTTP, SSE, stats) handles every token of every request: on a small machine the compilers'
 * background jobs, 1–4 ms each while a server warms up, take the core the engine's main thread wakes on to
 * queue the next decode, and that token waits for the scheduler's next tick although the other core is idle.
 * Node keeps V8's flags writable after start-up (`--no-freeze-flags-after-init`), so this acts like the
 * command-line flags; a test checks it on the Node that runs it.
 */
export function dropOptimizingCompilers(threads: number | undefined, cores = os.availableParallelism()): boolean {
    if (!leavesNoCoreForCompilers(threads, cores))
        return false;
    v8.setFlagsFromString(noOptimizingCompilers.join(" "));
    return true;
}
