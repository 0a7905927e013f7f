import type {EngineInfo} from "../protocol/engineMessages.js";
import {describeGpuFallback} from "../common/gpuBackendText.js";
import type {CliIo} from "./cliIo.js";

/** "Warning: CUDA failed the engine's GPU self-test (…); running on Vulkan instead", one line per skipped backend, on stderr. */
export function warnGpuFallbacks(info: EngineInfo, io: CliIo): void {
    for (const fallback of info.gpuFallbacks)
        io.stderr(`Warning: ${describeGpuFallback(fallback, info.backend)}\n`);
}
