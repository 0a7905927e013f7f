import fs from "node:fs/promises";
import {errorMessage} from "../../common/errorMessage.js";

/**
 * Checks that `file` is a LoRA adapter GGUF before llama.cpp reads it: a missing file, a directory or a model given as
 * an adapter get a clear message here, where llama.cpp's is a bare "failed to load". llama.cpp itself checks the rest
 * (the architecture, each tensor's base weight and shape, the data within the file) and refuses with its reason.
 */
export async function checkLoraAdapterFile(file: string): Promise<void> {
    const stat = await fs.stat(file).catch((error: unknown) => {
        const code = (error as NodeJS.ErrnoException).code;
        throw new Error(code === "ENOENT" || code === "ENOTDIR" ? "file not found" : `cannot read it: ${errorMessage(error)}`);
    });
    if (!stat.isFile())
        throw new Error("not a file");
    const {readGgufFileInfo} = await import("node-llama-cpp");
    const info = await readGgufFileInfo(file, {logWarnings: false, spliceSplitFiles: false, sourceType: "filesystem", readTensorInfo: false})
        .catch((error: unknown) => {
            throw new Error(`not a readable GGUF file (${errorMessage(error)})`);
        });
    const metadata = info.metadata as {general?: {type?: unknown}, adapter?: {type?: unknown}};
    const generalType = metadata.general?.type;
    if (generalType !== "adapter")
        throw new Error(`not a LoRA adapter: its general.type is ${generalType === undefined ? "missing" : JSON.stringify(generalType)}, not "adapter"` +
            (generalType === "model" || generalType === undefined ? " (is it a model?)" : ""));
    if (metadata.adapter?.type !== "lora")
        throw new Error(`not a LoRA adapter: its adapter.type is ${JSON.stringify(metadata.adapter?.type ?? null)}, not "lora"`);
}
