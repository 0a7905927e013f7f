/**
 * llama.cpp's server's `GET /slots` on our server: each engine sequence, the request it runs or last ran, the tokens it
 * holds and the request's sampling settings, as llama-server answers by default (no prompt or output text). With
 * `?fail_on_no_slot=1` a server whose sequences are all busy answers 503, which load balancers use to route elsewhere.
 */
import type {EngineInfo} from "../../../protocol/engineMessages.js";
import type {LlamaCppSlot, LlamaCppSlotParams} from "../../../protocol/llamaCppSlots.js";
import type {LoraScaleEntry} from "../../../protocol/loraAdapters.js";
import type {EngineClient} from "../engineClient/engineClient.js";
import type {SequenceSlot, SlotSettings} from "../engineClient/sequenceSlots.js";
import {defaultParams} from "./propsRoute.js";

/** `info`: the running engine's. */
export function llamaCppSlots(client: EngineClient, info: EngineInfo): LlamaCppSlot[] {
    return Array.from({length: info.parallel}, (_, id): LlamaCppSlot => {
        const slot: LlamaCppSlot = {id, n_ctx: info.contextSize, speculative: false, is_processing: false};
        const taken = client.sequenceSlot(id);
        const listed = taken === undefined ? slot : {...slot, ...requestFields(taken, info.prefixCache)};
        // A slot action (erase, restore) since its last request set what it holds.
        const held = client.sequenceHeldSinceAction(id);
        return held === undefined || listed.is_processing ? listed : {...listed, n_prompt_tokens: held};
    });
}

/** Whether any sequence is free (`fail_on_no_slot`). */
export function hasIdleSlot(slots: readonly LlamaCppSlot[]): boolean {
    return slots.some((slot) => !slot.is_processing);
}

/**
 * As llama-server: `n_prompt_tokens` counts the tokens the sequence holds (its prompt, then each decoded token too), and
 * once the request ends the counts of the request reset (nothing processed, decoded or remaining: −1), while the
 * sequence keeps its tokens for the prefix cache (none when the cache is off, or after a failure, which clears it).
 */
function requestFields({lifecycle, sent, lora}: SequenceSlot, prefixCache: boolean): Omit<LlamaCppSlot, "id" | "n_ctx" | "speculative"> {
    const request = {id_task: sent.task, params: slotParams(sent.settings, lifecycle.maxTokens, lora)};
    const {promptTokens, cachedTokens, generatedTokens} = lifecycle;
    if (lifecycle.phase !== "running") {
        // The last token sampled is not evaluated: the sequence holds the tokens before it.
        const held = prefixCache && lifecycle.reason !== "error" ? promptTokens + Math.max(0, generatedTokens - 1) : 0;
        return {is_processing: false, ...request, n_prompt_tokens: held, n_prompt_tokens_processed: 0, n_prompt_tokens_cache: 0,
            next_token: [{has_next_token: false, has_new_line: false, n_remain: -1, n_decoded: 0}]};
    }
    // A prompt evaluated in chunks is held up to its last chunk; one in one go is evaluated by its first token.
    const {prefilledTokens} = lifecycle;
    const processed = lifecycle.firstToken !== undefined ? promptTokens : prefilledTokens ?? cachedTokens;
    return {
        is_processing: true,
        ...request,
        n_prompt_tokens: prefilledTokens ?? promptTokens + generatedTokens,
        n_prompt_tokens_processed: processed - cachedTokens,
        n_prompt_tokens_cache: cachedTokens,
        next_token: [{has_next_token: true, has_new_line: sent.hasNewLine, n_remain: Math.max(0, lifecycle.maxTokens - generatedTokens),
            n_decoded: generatedTokens}]
    };
}

function slotParams(settings: SlotSettings, maxTokens: number, lora: LoraScaleEntry[]): LlamaCppSlotParams {
    const {stream: _stream, ...defaults} = defaultParams;
    const {penalties, dry, xtc} = settings;
    return {
        ...defaults,
        n_predict: maxTokens,
        max_tokens: maxTokens,
        temperature: settings.temperature ?? defaults.temperature,
        top_k: settings.topK ?? defaults.top_k,
        top_p: settings.topP ?? defaults.top_p,
        min_p: settings.minP ?? defaults.min_p,
        seed: settings.seed ?? defaults.seed,
        repeat_last_n: penalties?.lastTokens ?? defaults.repeat_last_n,
        repeat_penalty: penalties?.repeat ?? defaults.repeat_penalty,
        presence_penalty: penalties?.presence ?? defaults.presence_penalty,
        frequency_penalty: penalties?.frequency ?? defaults.frequency_penalty,
        ...(dry !== undefined ? {dry_multiplier: dry.multiplier, dry_base: dry.base, dry_allowed_length: dry.allowedLength,
            dry_penalty_last_n: dry.lastTokens} : {}),
        ...(xtc !== undefined ? {xtc_probability: xtc.probability, xtc_threshold: xtc.threshold} : {}),
        ignore_eos: settings.ignoreEos ?? false,
        lora
    };
}
