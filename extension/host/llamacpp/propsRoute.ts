/**
 * llama.cpp's server's `GET /props` and `POST /apply-template` on our server, so tools written for llama-server find
 * what they read there: the per-sequence context, the sequences, the model, its template and special tokens, and the
 * prompt a chat request renders to.
 */
import type {ApplyTemplateAnswer, LlamaCppDefaultParams, LlamaCppProps} from "../../../protocol/llamaCppProps.js";
import {defaultXtcThreshold, dryDefaults} from "../../../protocol/llamaCppSamplers.js";
import {defaultPenaltyLastTokens, type EngineInfo} from "../../../protocol/engineMessages.js";
import type {ChatCompletionRequest} from "../../../protocol/openaiApi.js";
import {ApiRequestError} from "../../../protocol/openaiFields.js";
import {loraScaleEntries} from "../../../protocol/loraAdapters.js";
import {errorMessage} from "../../../common/errorMessage.js";
import type {EngineClient} from "../engineClient/engineClient.js";

/** What the server is, in llama-server's `build_info` slot. */
const buildInfo = "inference-monitor 0.1.0 (node-llama-cpp 3.21.1)";

/** What a request gets for the settings it leaves out (GenerateRequest's defaults, in llama-server's names). */
export const defaultParams: Readonly<Omit<LlamaCppDefaultParams, "lora">> = {
    n_predict: -1, temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0, seed: -1, repeat_last_n: defaultPenaltyLastTokens,
    repeat_penalty: 1, presence_penalty: 0, frequency_penalty: 0, dry_multiplier: 0, dry_base: dryDefaults.base,
    dry_allowed_length: dryDefaults.allowedLength, dry_penalty_last_n: dryDefaults.lastTokens, xtc_probability: 0,
    xtc_threshold: defaultXtcThreshold, ignore_eos: false, stream: false,
    typical_p: 1, top_n_sigma: -1, dynatemp_range: 0, dynatemp_exponent: 1, mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, min_keep: 0,
    // node-llama-cpp's sampler chain (its AddonSampler): logit bias, penalties, DRY, then top-k, top-p, min-p, XTC, temperature.
    samplers: ["penalties", "dry", "top_k", "top_p", "min_p", "xtc", "temperature"]
};

/** `info`: the running engine's (the caller answers 503 while there is none). */
export async function llamaCppProps(client: EngineClient, info: EngineInfo, modelId: string, metrics: boolean): Promise<LlamaCppProps> {
    const {bos, eos, chatTemplate} = await client.tokenizerInfo();
    return {
        default_generation_settings: {n_ctx: info.contextSize, params: {...defaultParams, lora: loraScaleEntries(info.loraAdapters)}},
        total_slots: info.parallel,
        model_alias: modelId,
        model_path: info.model.path,
        modalities: {vision: false, video: false, audio: false},
        chat_template: chatTemplate ?? "",
        bos_token: bos ?? "",
        eos_token: eos ?? "",
        build_info: buildInfo,
        endpoint_slots: true,
        endpoint_props: true,
        endpoint_metrics: metrics,
        is_sleeping: false
    };
}

/**
 * The prompt text `request` renders to, as its template writes it (special tokens as their text), less a leading BOS: a
 * client that tokenizes it as a prompt gets BOS back where the vocabulary asks for it.
 */
export async function applyTemplate({messages, tools, continueFinalMessage}: ChatCompletionRequest, client: EngineClient):
Promise<ApplyTemplateAnswer> {
    let rendered;
    try {
        rendered = await client.tokenize({chat: {messages, ...tools !== undefined ? {tools} : {},
            ...continueFinalMessage !== undefined ? {continueFinalMessage} : {}}});
    } catch (error) {
        throw new ApiRequestError(`could not render the prompt: ${errorMessage(error)}`, null, 400);
    }
    const {bos} = await client.tokenizerInfo();
    const text = rendered.text ?? "";
    return {prompt: bos !== undefined && text.startsWith(bos) ? text.slice(bos.length) : text};
}
