import type {EngineInfo} from "../../../protocol/engineMessages.js";
import {loraAdapterViews, parseLoraScalesBody, type LoraAdapterView} from "../../../protocol/loraAdapters.js";
import type {EngineClient} from "../engineClient/engineClient.js";

/** llama-server's `GET /lora-adapters`: the adapters and the scales they run with. */
export function loraAdapters(info: EngineInfo): LoraAdapterView[] {
    return loraAdapterViews(info.loraAdapters);
}

/**
 * llama-server's `POST /lora-adapters`: `[{"id": N, "scale": X}, …]` sets every adapter's scale (one left out: 0) for the
 * requests that follow. node-llama-cpp applies adapters to the whole context, so the engine applies them once the
 * running requests are done, and starts none meanwhile (engine/loraScaleChanges.ts); this answers once they are in,
 * with llama-server's `{"success": true}`. A malformed body or an unknown id is a 400 (llama-server skips unknown ids).
 */
export async function setLoraAdapters(client: EngineClient, info: EngineInfo, body: unknown): Promise<{success: true}> {
    await client.setLoraScales(parseLoraScalesBody(body, info.loraAdapters));
    return {success: true};
}
