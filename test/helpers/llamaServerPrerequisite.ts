import fs from "node:fs";
import {expectedLlamaServerPath} from "../../scripts/llamaServer.js";
import {skipReason} from "./prerequisites.js";

/** For `describe(suite, {skip: llamaServerSkipReason(suite)}, …)`: the suites that run llama.cpp's llama-server. */
export function llamaServerSkipReason(suite: string): string | false {
    const binaryPath = expectedLlamaServerPath();
    const built = binaryPath !== undefined && fs.existsSync(binaryPath);
    return skipReason(suite, built ? [] : [`llama-server (${binaryPath ?? "node_modules missing"}): run bash .ci/build-llama-server.sh (~20 min on 2 cores)`]);
}
