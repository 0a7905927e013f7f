import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {loraAdapterViews, type LoraAdapterView} from "../../../protocol/loraAdapters.js";
import {ApiRequestError} from "../../../protocol/openaiFields.js";

/**
 * llama-server's `/lora-adapters`: GET lists the adapters and their scales. POST, which sets them at run time there, is
 * answered 501: node-llama-cpp applies adapters to the whole context, so they keep the scales they were started with
 * (protocol/loraAdapters.ts).
 */
export function loraAdapters(method: "GET" | "HEAD" | "POST", info: EngineInfo): LoraAdapterView[] {
    if (method === "POST")
        throw new ApiRequestError("This server does not change LoRA adapter scales at run time; start it with the scales to use " +
            "(--lora-scaled FILE:SCALE)", null, 501, "not_supported_error", "not_supported");
    return loraAdapterViews(info.loraAdapters);
}
