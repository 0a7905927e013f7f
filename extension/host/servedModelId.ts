import path from "node:path";
import type {EngineInfo} from "../../protocol/engineMessages.js";

/**
 * The loaded model's id wherever a client or a scraper names it: the API's model id (`GET /v1/models`), the chat
 * model's id in VS Code, and `/metrics`' `model_name` label (vLLM's served model name, the same in both places).
 * Its file name without `.gguf`: stable across restarts, unlike a path.
 */
export function servedModelId(info: Pick<EngineInfo, "model">): string {
    return path.basename(info.model.path).replace(/\.gguf$/i, "");
}
