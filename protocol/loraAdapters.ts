/**
 * LoRA adapters, as llama-server takes them: files given at start (`--lora FILE`, `--lora-scaled FILE:SCALE`), each
 * applied to every request with its scale. The engine option and the engine's info carry them
 * ({@link LoraAdapter}); `GET /lora-adapters` lists them in llama-server's shape ({@link LoraAdapterView}); a
 * request's `lora` field ({@link parseRequestLora}) names scales by adapter id, and an adapter it leaves out has
 * scale 0, as llama-server reads it.
 *
 * node-llama-cpp applies adapters to a whole context, every sequence at once, so a request whose `lora` asks for other
 * scales than the running requests' waits until they are done (GenerateRequest.loraScales), as llama-server batches no
 * requests with different adapters together. `POST /lora-adapters` ({@link parseLoraScalesBody}) changes the scales for
 * every request that names none, as llama-server's does; the engine applies them once no request runs.
 */
import {ApiRequestError, fail} from "./openaiFields.js";
import {ProtocolError, expectArray, expectNumber, expectObject, expectString, type JsonObject} from "./validation.js";

export type LoraAdapter = {path: string, scale: number};

/** One entry of llama-server's `GET /lora-adapters`. */
export type LoraAdapterView = {id: number, path: string, scale: number};

/** An adapter's scale by id, as llama-server's `lora` lists them (a request's field, and `params.lora` in /props and /slots). */
export type LoraScaleEntry = {id: number, scale: number};

/** The most adapters a server takes (llama-server has no limit; this bounds what crosses the engine boundary). */
export const maxLoraAdapters = 64;

/** The largest |scale| accepted (llama.cpp takes any float; beyond this, a typo). */
export const maxLoraScale = 1000;

/** Whether `scale` is one this server takes: finite, within ±maxLoraScale (every way a scale comes in checks this). */
export function isLoraScale(scale: number): boolean {
    return Number.isFinite(scale) && Math.abs(scale) <= maxLoraScale;
}

/** `obj[key]` as adapters (EngineOptions.loraAdapters, EngineInfo.loraAdapters); throws ProtocolError. */
export function parseLoraAdapters(obj: JsonObject, key: string, what: string): LoraAdapter[] {
    return expectArray(obj, key, what, maxLoraAdapters).map((item) => {
        const adapter = expectObject(item, `${what}.${key}[]`);
        const scale = expectNumber(adapter, "scale", `${what}.${key}[]`);
        if (!isLoraScale(scale))
            throw new ProtocolError(`${what}.${key}[].scale: ${scale} is beyond ±${maxLoraScale}`);
        return {path: expectString(adapter, "path", `${what}.${key}[]`, 4096), scale};
    });
}

/** `obj[key]` as scales, one per adapter (`setLoraScales`); throws ProtocolError. */
export function parseLoraScales(obj: JsonObject, key: string, what: string): number[] {
    return expectArray(obj, key, what, maxLoraAdapters).map((value, i) => {
        if (typeof value !== "number" || !isLoraScale(value))
            throw new ProtocolError(`${what}.${key}[${i}]: expected a number within ±${maxLoraScale}, got ${JSON.stringify(value)?.slice(0, 40)}`);
        return value;
    });
}

/** Checks adapters given as options; throws RangeError naming the bad one. */
export function checkLoraAdapters(adapters: readonly LoraAdapter[]): void {
    if (adapters.length > maxLoraAdapters)
        throw new RangeError(`at most ${maxLoraAdapters} LoRA adapters, got ${adapters.length}`);
    for (const {path, scale} of adapters) {
        if (path === "")
            throw new RangeError("a LoRA adapter's path is empty");
        if (!isLoraScale(scale))
            throw new RangeError(`the LoRA adapter ${path}'s scale must be a number within ±${maxLoraScale}, got ${scale}`);
    }
}

export function loraAdapterViews(adapters: readonly LoraAdapter[]): LoraAdapterView[] {
    return adapters.map(({path, scale}, id) => ({id, path, scale}));
}

/** Every adapter's scale by id: what a request that names no scales runs with. */
export function loraScaleEntries(adapters: readonly LoraAdapter[]): LoraScaleEntry[] {
    return adapters.map(({scale}, id) => ({id, scale}));
}

/**
 * A request's `lora` (`[{"id": 0, "scale": 0.5}, …]`) as the scale of each of the server's adapters (one left out: 0);
 * throws ApiRequestError (400) for a malformed list or an unknown id.
 */
export function parseRequestLora(value: unknown, adapters: readonly LoraAdapter[], field = "lora"): number[] {
    if (!Array.isArray(value))
        fail(field, "must be a list of {\"id\": N, \"scale\": X}");
    const scales = adapters.map(() => 0);
    for (const item of value) {
        if (typeof item !== "object" || item === null || Array.isArray(item))
            fail(field, "each entry must be an object {\"id\": N, \"scale\": X}");
        const {id, scale} = item as Record<string, unknown>;
        if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= adapters.length)
            fail(field, `${JSON.stringify(id)} is not an adapter id (this server has ${adapters.length === 0
                ? "no LoRA adapters" : `adapters 0 to ${adapters.length - 1}; GET /lora-adapters lists them`})`);
        // The engine takes no scale beyond ±maxLoraScale (parseLoraScales): refused here, a clear 400, not a lost message.
        if (typeof scale !== "number" || !isLoraScale(scale))
            fail(field, `adapter ${id}'s scale must be a number within ±${maxLoraScale}`);
        scales[id] = scale;
    }
    return scales;
}

/**
 * A request's `lora` as its own scales, or undefined where it names none: an empty list, which llama-server reads as
 * the server's scales (its `lora` map is then empty), unlike `POST /lora-adapters`' empty list (every adapter at 0).
 */
export function requestLoraScales(value: unknown, adapters: readonly LoraAdapter[]): number[] | undefined {
    const scales = parseRequestLora(value, adapters);
    return Array.isArray(value) && value.length === 0 ? undefined : scales;
}

/**
 * `POST /lora-adapters`' body as every adapter's new scale (one left out: 0, as llama-server sets it); throws
 * ApiRequestError (400) for a body that is not such a list or names an unknown id (llama-server skips unknown ids).
 */
export function parseLoraScalesBody(value: unknown, adapters: readonly LoraAdapter[]): number[] {
    if (!Array.isArray(value))
        throw new ApiRequestError("Request body must be an array of {\"id\": N, \"scale\": X}", null);
    return parseRequestLora(value, adapters, "body");
}
