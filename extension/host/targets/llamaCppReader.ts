/**
 * llama.cpp's `llama-server`: `/health` (503 while loading), `/slots` (per-slot state; off with
 * `--no-slots`), `/metrics` (`llamacpp:*`, only with `--metrics`) and `/v1/models` for the name.
 *
 * Mapping: running = busy slots (or `requests_processing`), waiting = `requests_deferred`; prompt
 * tokens = `prompt_tokens_total` + `prompt_tokens_cached_total` (vLLM counts cached prompt tokens as
 * prompt tokens too), and those cached ones are the prefix-cache hits; generation tokens =
 * `tokens_predicted_total` plus what the busy slots have decoded so far (llama.cpp adds a request's
 * tokens to its counter only when the request ends); KV use = the busy slots' tokens over all slots' `n_ctx`.
 */
import {parseLlamaCppSlots, type LlamaCppSlotReading} from "../../../protocol/llamaCppSlots.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {parseMetricsAnswer, sumSamples} from "./prometheusText.js";
import {readModelId, targetGet, TargetReadError, type TargetGetOptions} from "./targetHttp.js";
import type {TargetReading} from "./targetReading.js";

export type ModelName = () => Promise<string | undefined>;

/** `modelName`: the served model's name (by default asked of `/v1/models` each time). */
export async function readLlamaCpp(baseUrl: string, http: TargetGetOptions, modelName?: ModelName): Promise<TargetReading> {
    const health = await targetGet(`${baseUrl}/health`, http);
    if (health.status === 503)
        throw new TargetReadError("the server is loading its model (/health: 503)", "bad");
    if (health.status !== 200)
        throw new TargetReadError(`/health answered HTTP ${health.status}; not a llama.cpp server?`, "bad");
    // /metrics first, then /slots: a request that ends between the two reads is then missing from both
    // (the next poll counts it), never in both (its decoded tokens in the slot and again in the counter).
    const metricsResponse = await targetGet(`${baseUrl}/metrics`, http);
    const slotsResponse = await targetGet(`${baseUrl}/slots`, http);
    const model = modelName !== undefined ? await modelName() : await readModelId(baseUrl, http);
    const reading: TargetReading = {kind: "llamacpp", model, histograms: {}, notes: [
        "per-request latencies (TTFT, ITL, queue) are not exported by llama.cpp's server: watch it through `inference-monitor proxy` for those"
    ]};
    const slots = slotsResponse.status === 200 ? parseSlots(slotsResponse.text) : undefined;
    if (slots === undefined)
        reading.notes.push(`/slots is off (HTTP ${slotsResponse.status}; the server runs with --no-slots): no per-slot context use`);
    else {
        reading.parallel = slots.length;
        reading.contextSize = slots[0]?.nCtx;
        reading.running = slots.filter((slot) => slot.processing).length;
        reading.kvCapacityTokens = slots.reduce((sum, slot) => sum + slot.nCtx, 0);
        // n_prompt_tokens is what a slot holds: its prompt and, as they are decoded, the new tokens too.
        reading.kvUsedTokens = slots.reduce((sum, slot) => sum + (slot.processing ? slot.promptTokens : 0), 0);
        reading.slots = slots.map((slot) => ({processing: slot.processing, tokens: slot.promptTokens, contextSize: slot.nCtx}));
    }
    if (metricsResponse.status !== 200) {
        reading.notes.push(`/metrics is off (HTTP ${metricsResponse.status}): start llama-server with --metrics for token counts and the queue`);
        return reading;
    }
    const exposition = parseMetricsAnswer(`${baseUrl}/metrics`, metricsResponse.text);
    const value = (name: string) => sumSamples(exposition, `llamacpp:${name}`);
    const prompt = value("prompt_tokens_total");
    const cached = value("prompt_tokens_cached_total");
    const predicted = value("tokens_predicted_total");
    if (prompt === undefined || predicted === undefined)
        throw new TargetReadError("/metrics has no llamacpp:prompt_tokens_total / tokens_predicted_total; not a llama.cpp server?", "bad");
    reading.promptTokensTotal = prompt + (cached ?? 0);
    if (cached !== undefined) {
        reading.prefixCacheQueriesTotal = prompt + cached;
        reading.prefixCacheHitsTotal = cached;
    }
    reading.generationTokensTotal = predicted + (slots ?? []).reduce((sum, slot) => sum + (slot.processing ? slot.decoded : 0), 0);
    reading.running ??= value("requests_processing");
    reading.waiting = value("requests_deferred");
    return reading;
}

function parseSlots(text: string): LlamaCppSlotReading[] {
    let json: unknown;
    try {
        json = JSON.parse(text);
    } catch {
        throw new TargetReadError("/slots is not JSON", "bad");
    }
    try {
        return parseLlamaCppSlots(json);
    } catch (error) {
        throw new TargetReadError(errorMessage(error), "bad");
    }
}
