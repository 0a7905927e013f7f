/**
 * Sampling fields llama.cpp's server honours that node-llama-cpp 3.21.1 has no sampler for — locally typical sampling,
 * Mirostat, top-n-sigma, dynamic temperature. A request that sets one to a value that would change its sampling is
 * still served (as llama-server serves fields it does not know), without it; the server says so once per field, so a
 * user tuning it learns why nothing changes. Their neutral values (what clients send by default) say nothing.
 */
import type {JsonObject} from "./validation.js";

/** Each field, the value that turns it off, and what the server cannot do. */
const unsupported: ReadonlyArray<{field: string, off: (value: number) => boolean, what: string}> = [
    {field: "typical_p", off: (value) => value >= 1, what: "locally typical sampling"},
    {field: "mirostat", off: (value) => value === 0, what: "Mirostat sampling"},
    {field: "top_n_sigma", off: (value) => value <= 0, what: "top-n-sigma sampling"},
    {field: "dynatemp_range", off: (value) => value <= 0, what: "dynamic temperature"}
];

/** The fields of `body` set to a value this server cannot honour, each with why (empty: none). */
export function ignoredSamplingFields(body: JsonObject): Array<{field: string, message: string}> {
    const ignored: Array<{field: string, message: string}> = [];
    for (const {field, off, what} of unsupported) {
        const value = body[field];
        if (typeof value === "number" && Number.isFinite(value) && !off(value))
            ignored.push({field, message: `${field}=${value} is ignored: node-llama-cpp has no ${what}, so requests that set it are served without it`});
    }
    return ignored;
}
