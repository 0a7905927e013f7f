/**
 * Benchmarks that run bare node-llama-cpp in their own process (bench:engine's bare loop, bench:peer's kernel
 * ceiling) compare it with an engine process that runs on one libuv thread (`engineThreadpoolSize`). Node's default
 * four threads cost node-llama-cpp's per-token tasks a lot: each decode lands on another thread, often on the other
 * core (measured 2026-12-06, demo `small` f16, one sequence at 480 tokens, 1 llama thread: 340–369 tok/s with four,
 * 389–423 with one, interleaved). A bare side on four threads would be a handicapped baseline.
 *
 * libuv reads UV_THREADPOOL_SIZE once, when its pool starts, so the size cannot change inside a running process:
 * `runOnEngineThreadpool(main)` runs `main` when this process already has the engine's size, else runs this script
 * again in a child that has it and exits with the child's code.
 */
import {spawnSync} from "node:child_process";
import {engineThreadpoolSize} from "../extension/host/engineClient/childProcessTransport.js";

export function runOnEngineThreadpool(main: () => Promise<void>): void {
    const size = String(engineThreadpoolSize);
    if (process.env.UV_THREADPOOL_SIZE === size) {
        main().catch((error: unknown) => {
            console.error(error);
            process.exitCode = 1;
        });
        return;
    }
    const child = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
        stdio: "inherit",
        env: {...process.env, UV_THREADPOOL_SIZE: size}
    });
    if (child.error !== undefined)
        throw child.error;
    process.exitCode = child.status ?? 1;
}
