import {isLoraScale, maxLoraAdapters, type LoraAdapter} from "../../protocol/loraAdapters.js";
import {isObject} from "../../protocol/validation.js";

/**
 * The valid entries of `inferenceMonitor.loraAdapters` (`[{"path": "…", "scale": 1}]`; scale 1 when left out), in order.
 * An entry without a path or with a scale that is not a number within ±1000 is left out; the engine refuses a file that
 * is not an adapter for the model, naming it, when it starts.
 */
export function readLoraAdaptersSetting(value: unknown): LoraAdapter[] {
    const adapters: LoraAdapter[] = [];
    for (const entry of Array.isArray(value) ? value as unknown[] : []) {
        if (!isObject(entry) || typeof entry.path !== "string" || entry.path.trim() === "")
            continue;
        const scale = entry.scale ?? 1;
        if (typeof scale !== "number" || !isLoraScale(scale))
            continue;
        adapters.push({path: entry.path.trim(), scale});
    }
    return adapters.slice(0, maxLoraAdapters);
}
