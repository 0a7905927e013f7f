/**
 * One home for turning a chat (or prompt) request into an engine request, shared by the
 * OpenAI-compatible endpoint (issue E) and VS Code's language model provider (issue H): the same
 * defaults, the same clamping to the context, the same sampling fields.
 */
import type {DryPenalty, EngineInfo, ExcludeTopChoices, LogitBias, ResponseFormat, SamplingPenalties, TextBias} from "../../../protocol/engineMessages.js";
import type {GenerateInput} from "../engineClient/engineClient.js";

/** Sampling fields a caller may set; absent ones keep the engine's defaults. */
export type GenerationParams = {
    maxTokens?: number | undefined,
    temperature?: number | undefined,
    topP?: number | undefined,
    topK?: number | undefined,
    minP?: number | undefined,
    penalties?: SamplingPenalties | undefined,
    logitBias?: readonly LogitBias[] | undefined,
    /** llama.cpp's `logit_bias` keyed by text (GenerateRequest.textBias). */
    textBias?: readonly TextBias[] | undefined,
    /** llama.cpp's DRY and XTC samplers (GenerateRequest's). */
    dry?: DryPenalty | undefined,
    xtc?: ExcludeTopChoices | undefined,
    responseFormat?: ResponseFormat | undefined,
    logprobs?: number | undefined,
    /** Score the prompt, with this many alternatives per token (GenerateRequest.promptLogprobs). */
    promptLogprobs?: number | undefined,
    /** Report the prompt's and the generated tokens' ids (GenerateRequest.returnTokenIds). */
    returnTokenIds?: boolean | undefined,
    /** vLLM's `stop_token_ids`, `min_tokens`, `include_stop_str_in_output` and `priority` (GenerateRequest's). */
    stopTokenIds?: readonly number[] | undefined,
    minTokens?: number | undefined,
    includeStopString?: boolean | undefined,
    priority?: number | undefined,
    /** vLLM's `bad_words`, `skip_special_tokens: false` and `truncate_prompt_tokens` (GenerateRequest's). */
    badWords?: readonly string[] | undefined,
    outputSpecialTokens?: boolean | undefined,
    truncatePromptTokens?: number | undefined,
    seed?: number | undefined,
    stop?: readonly string[] | undefined,
    ignoreEos?: boolean | undefined,
    /** llama.cpp's `cache_prompt`: false reuses no cached prefix (GenerateRequest.reusePrefix). */
    cachePrompt?: boolean | undefined,
    /** llama.cpp's `id_slot` (≥ 0; it wraps around the sequences, as llama-server's around its slots): GenerateRequest.sequence. */
    slot?: number | undefined,
    /** Code completion's limits (GenerateRequest.minIndent, maxGenerationMs). */
    minIndent?: number | undefined,
    maxGenerationMs?: number | undefined,
    /** `maxTokens` is an upper bound, lowered to what the context leaves after the prompt (as llama.cpp's server treats it). */
    clampToContext?: boolean | undefined
};

/**
 * Without `maxTokens`, a request may generate up to one sequence's share of the context
 * (contextSize / parallel, as llama.cpp's per-slot context), lowered to what the prompt leaves.
 */
export function defaultMaxTokens(info: EngineInfo): number {
    return Math.max(1, Math.floor(info.contextSize / Math.max(1, info.parallel)));
}

/** What a request generates from: a prompt (FIM with `suffix`), token ids, or messages (with the tools they may call). */
export type GenerationSource = Pick<GenerateInput, "prompt" | "promptTokens" | "messages" | "suffix" | "infill" | "tools" | "toolChoice" | "parallelToolCalls" |
    "separateReasoning" | "allowReasoning" | "continueFinalMessage">;

/** The engine request for `input` (prompt, messages or FIM), labelled with its client. */
export function generationInput(
    input: GenerationSource, params: GenerationParams, info: EngineInfo, client: string
): GenerateInput {
    return {
        ...input,
        client,
        maxTokens: params.maxTokens ?? defaultMaxTokens(info),
        ...(params.maxTokens === undefined || params.clampToContext === true ? {clampMaxTokens: true} : {}),
        ...(params.temperature !== undefined ? {temperature: params.temperature} : {}),
        ...(params.topP !== undefined ? {topP: params.topP} : {}),
        ...(params.topK !== undefined ? {topK: params.topK} : {}),
        ...(params.minP !== undefined ? {minP: params.minP} : {}),
        ...(params.penalties !== undefined ? {penalties: {...params.penalties}} : {}),
        ...(params.logitBias !== undefined && params.logitBias.length > 0 ? {logitBias: [...params.logitBias]} : {}),
        ...(params.textBias !== undefined && params.textBias.length > 0 ? {textBias: params.textBias.map((entry) => ({...entry}))} : {}),
        ...(params.dry !== undefined ? {dry: {...params.dry, sequenceBreakers: [...params.dry.sequenceBreakers]}} : {}),
        ...(params.xtc !== undefined ? {xtc: {...params.xtc}} : {}),
        ...(params.responseFormat !== undefined ? {responseFormat: params.responseFormat} : {}),
        ...(params.logprobs !== undefined ? {logprobs: params.logprobs} : {}),
        ...(params.returnTokenIds === true ? {returnTokenIds: true} : {}),
        ...(params.stopTokenIds !== undefined && params.stopTokenIds.length > 0 ? {stopTokenIds: [...params.stopTokenIds]} : {}),
        ...(params.minTokens !== undefined && params.minTokens > 0 ? {minTokens: params.minTokens} : {}),
        ...(params.includeStopString === true ? {includeStopString: true} : {}),
        ...(params.priority !== undefined && params.priority !== 0 ? {priority: params.priority} : {}),
        ...(params.badWords !== undefined && params.badWords.length > 0 ? {badWords: [...params.badWords]} : {}),
        ...(params.outputSpecialTokens === true ? {outputSpecialTokens: true} : {}),
        ...(params.truncatePromptTokens !== undefined ? {truncatePromptTokens: params.truncatePromptTokens} : {}),
        ...(params.promptLogprobs !== undefined ? {promptLogprobs: params.promptLogprobs} : {}),
        ...(params.seed !== undefined ? {seed: params.seed} : {}),
        ...(params.stop !== undefined && params.stop.length > 0 ? {stop: [...params.stop]} : {}),
        ...(params.ignoreEos === true ? {ignoreEos: true} : {}),
        ...(params.cachePrompt === false ? {reusePrefix: false} : {}),
        ...(params.slot !== undefined ? {sequence: params.slot % Math.max(1, info.parallel)} : {}),
        ...(params.minIndent !== undefined ? {minIndent: params.minIndent} : {}),
        ...(params.maxGenerationMs !== undefined ? {maxGenerationMs: params.maxGenerationMs} : {})
    };
}
