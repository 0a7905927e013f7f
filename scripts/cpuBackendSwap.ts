/**
 * Puts a CPU backend built on this machine (scripts/build-cpu-backend.sh) in place of node-llama-cpp's
 * prebuilt library of the same variant, for one benchmark run; every process started meanwhile (engines,
 * `serve`) loads it. A diagnostic, never the product's setup. Files are replaced by rename, so a process
 * that has the old library mapped keeps it. The prebuilt one is kept beside it as `NAME.prebuilt` and
 * comes back when the returned function runs, when this process exits, or at the start of the next
 * swap if a run died before that.
 */
import fs from "node:fs";
import path from "node:path";

const prebuiltBins = path.resolve(__dirname, "../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");

function replaceByRename(source: string, target: string): void {
    fs.copyFileSync(source, `${target}.tmp`);
    fs.renameSync(`${target}.tmp`, target);
}

/** Whether `library` is a file named as one of node-llama-cpp's prebuilt CPU variants (libggml-cpu-VARIANT.so), as swapCpuBackend needs. */
export function isSwappableCpuBackend(library: string): boolean {
    return /^libggml-cpu-[\w-]+\.so$/.test(path.basename(library)) && fs.existsSync(path.join(prebuiltBins, path.basename(library))) &&
        fs.statSync(library, {throwIfNoEntry: false})?.isFile() === true;
}

/** Swaps `library` in; returns the function that puts the prebuilt library back (idempotent). */
export function swapCpuBackend(library: string): () => void {
    const target = path.join(prebuiltBins, path.basename(library));
    if (!/^libggml-cpu-[\w-]+\.so$/.test(path.basename(library)) || !fs.existsSync(target))
        throw new Error(`${library} is not a node-llama-cpp CPU variant: no prebuilt ${path.basename(library)} in ${prebuiltBins}`);
    const backup = `${target}.prebuilt`;
    if (fs.existsSync(backup))
        fs.renameSync(backup, target);
    fs.copyFileSync(target, backup);
    replaceByRename(library, target);
    let restored = false;
    const restore = (): void => {
        if (restored)
            return;
        restored = true;
        fs.renameSync(backup, target);
    };
    process.once("exit", restore);
    for (const signal of ["SIGINT", "SIGTERM"] as const)
        process.once(signal, () => {
            restore();
            process.exit(128 + (signal === "SIGINT" ? 2 : 15));
        });
    return restore;
}
