/**
 * The one declaration of every message between the host (EngineClient) and the engine, in both
 * directions. Process mode carries them over Node IPC; in-process mode hands the same objects over
 * directly. Both sides validate what they receive with the parse functions below.
 *
 * Timestamps are epoch milliseconds with sub-millisecond precision (`performance.timeOrigin +
 * performance.now()`) on the clock of the process that took them.
 */
import {
    ProtocolError, expectArray, expectBoolean, expectInteger, expectNumber, expectNumberArray, expectObject, expectOneOf, expectString,
    isObject, optionalBoolean, optionalInteger, optionalNumber, optionalString, type JsonObject
} from "./validation.js";
import {parseLoraAdapters, parseLoraScales, type LoraAdapter} from "./loraAdapters.js";

export const finishReasons = ["stop", "length", "abort", "error"] as const;
export type FinishReason = typeof finishReasons[number];

/** Why the engine refused or failed a request, so a server in front of it can answer with the right status. */
export const requestErrorCodes = ["invalid_request", "context_length_exceeded", "queue_full", "engine_error"] as const;
export type RequestErrorCode = typeof requestErrorCodes[number];

export const chatRoles = ["system", "user", "assistant", "tool"] as const;
/**
 * A chat message. An assistant message may carry the tool calls it made (`toolCalls`) and the reasoning it wrote
 * before its answer (`reasoning`, rendered as the template renders a thought); a `tool` message is one call's
 * result, matched to its call by `toolCallId` (or else to the earliest call still without one).
 */
export type ChatMessage = {
    role: typeof chatRoles[number], content: string, toolCalls?: ToolCall[], toolCallId?: string, reasoning?: string
};

/** A function the model may call: its parameters as a JSON schema (absent: it takes none). */
export type ToolDefinition = {name: string, description?: string, parameters?: JsonObject};
/** A call the model made: `arguments` is JSON text (an object), as OpenAI's API carries it. */
export type ToolCall = {id: string, name: string, arguments: string};
/**
 * Whether the model must call a tool: "auto" = it chooses (its output is parsed for calls), "required" = at
 * least one call, `{name}` = a call of that function (both sampled under a grammar of the call syntax).
 */
export type ToolChoice = "auto" | "required" | {name: string};
/** The bounds of a request's tools (OpenAI's: 128 functions, names of 1–64 letters, digits, `_` and `-`). */
export const maxTools = 128;
export const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

export type GenerateRequest = {
    id: string,
    /** Plain-text prompt; exactly one of `prompt`, `promptTokens` and `messages` is given. */
    prompt?: string,
    /** Token ids as the prompt, evaluated as given (no BOS added), as llama.cpp's server and vLLM take a completion's token prompt. */
    promptTokens?: number[],
    /** Chat messages, rendered with the model's chat template. */
    messages?: ChatMessage[],
    /**
     * With `messages` ending in an assistant message: the answer continues that message (Anthropic's prefill, vLLM's
     * `continue_final_message`) instead of starting a new turn. Default false.
     */
    continueFinalMessage?: boolean,
    /**
     * Number of tokens to generate at most; 0: none — the prompt is only evaluated (left in the prefix cache, as
     * llama.cpp's server does with `n_predict: 0`) or, with `promptLogprobs`, scored.
     */
    maxTokens: number,
    /**
     * `maxTokens` is an upper bound that may be lowered to what the context leaves after the prompt
     * (an API request that gave no `max_tokens`). Default false: a request that does not fit is refused.
     */
    clampMaxTokens?: boolean,
    /** Sampling temperature; 0 = greedy. Default 0.8. */
    temperature?: number,
    /**
     * Nucleus sampling: keep the smallest set of tokens whose probabilities add up to this (0 < topP ≤ 1).
     * Default 0.95 (node-llama-cpp's, llama.cpp's).
     */
    topP?: number,
    /** Keep only the K most likely tokens (an integer ≥ 0; 0 = all). Default 40 (node-llama-cpp's, llama.cpp's). */
    topK?: number,
    /** Drop tokens less likely than minP × the most likely one's probability (0 ≤ minP ≤ 1). Default 0 (off). */
    minP?: number,
    /** Repetition penalties; absent: none. */
    penalties?: SamplingPenalties,
    /** Added to the logits of these tokens before sampling (OpenAI's `logit_bias`). */
    logitBias?: LogitBias[],
    /** llama.cpp's `logit_bias` keyed by text: each token of the text (tokenized alone: no BOS, special tokens as text) gets the bias. */
    textBias?: TextBias[],
    /** llama.cpp's DRY ("don't repeat yourself") sampler; absent: off. */
    dry?: DryPenalty,
    /** llama.cpp's XTC ("exclude top choices") sampler; absent: off. */
    xtc?: ExcludeTopChoices,
    /** Generate JSON (OpenAI's `response_format`); absent: free text. */
    responseFormat?: ResponseFormat,
    /** With `messages`: functions the model may call, rendered by its chat template; calls come back in `finished`. */
    tools?: ToolDefinition[],
    /** With `tools`; default "auto". */
    toolChoice?: ToolChoice,
    /** Several calls in one answer (OpenAI's `parallel_tool_calls`); default true (with a named `toolChoice`: one call). */
    parallelToolCalls?: boolean,
    /**
     * With `messages`, for a model whose template has a reasoning (thought) segment, such as `<think>…</think>`:
     * true (default) = the reasoning comes in `tokens` events' `reasoning`, apart from the answer's `text`;
     * false = all output is `text`, as generated.
     */
    separateReasoning?: boolean,
    /**
     * false: for such a model, the answer starts at once, without reasoning (an empty reasoning segment closed at
     * the end of the prompt, as Qwen3's template does with `enable_thinking: false`). Default true.
     */
    allowReasoning?: boolean,
    /**
     * Report each generated token's log-probability and this many most likely alternatives (0 to
     * `maxTopLogprobs`) in its `tokens` events; absent: none (the cheaper path).
     */
    logprobs?: number,
    /**
     * Score the prompt: each prompt token's log-probability given the tokens before it (the model's own distribution,
     * no sampling applied), with this many most likely alternatives (0 to `maxTopLogprobs`), in a `promptLogprobs`
     * event before the first generated token. Such a prompt is evaluated from its first token (no prefix-cache reuse).
     */
    promptLogprobs?: number,
    /**
     * Report token ids: the prompt's as evaluated (its rendering, tokenized; `inputProcessed` event's `promptTokenIds`)
     * and each generated token's (`tokens` events' `ids`), as vLLM's `return_token_ids` and llama.cpp's `return_tokens`.
     */
    returnTokenIds?: boolean,
    seed?: number,
    /**
     * Generation ends (reason `stop`) when the output contains one of these; the stop text itself is not output unless
     * `includeStopString` (vLLM's `include_stop_str_in_output`).
     */
    stop?: string[],
    includeStopString?: boolean,
    /**
     * Generation ends (reason `stop`) after one of these tokens (vLLM's `stop_token_ids`): it is the last generated token, its
     * text is not output unless `includeStopString` (as the end of text's).
     */
    stopTokenIds?: number[],
    /**
     * vLLM's `min_tokens`: before this many tokens are generated, end-of-generation tokens and `stopTokenIds` are not sampled
     * and stop strings do not end the output. Default 0. Not with a grammar (`responseFormat`, a forced tool call).
     */
    minTokens?: number,
    /**
     * vLLM's `bad_words`: none of these words is generated. Each is tokenized as vLLM tokenizes it (as written, and after a
     * space); a one-token word is banned outright, a longer one's last token is banned where its other tokens were the
     * last ones generated.
     */
    badWords?: string[],
    /**
     * vLLM's `skip_special_tokens: false`: special tokens' text (`</s>`, `<|im_end|>` …) is part of the output. The token
     * that ends the answer (the end of text, a stop id) is left out unless `includeStopString`, as in vLLM.
     */
    outputSpecialTokens?: boolean,
    /**
     * vLLM's `truncate_prompt_tokens`: only the prompt's last this many tokens are evaluated (a BOS the prompt begins
     * with, from its rendering, is kept in their count); −1: the last a sequence holds.
     */
    truncatePromptTokens?: number,
    /** With `prompt`: fill in the middle between `prompt` and `suffix` (needs the model's FIM tokens). */
    suffix?: string,
    /** With `prompt` and `suffix`: llama.cpp's `/infill` prompt, with the cursor's line and other files' code. */
    infill?: InfillContext,
    /**
     * Stop (reason `length`) where a generated line starts with less indentation than this many spaces or tabs; that
     * line's text from there on is not output (llama.cpp's `n_indent`, for code completion).
     */
    minIndent?: number,
    /** Stop (reason `length`) at a generated newline once this many ms passed since the first token (llama.cpp's `t_max_predict_ms`). */
    maxGenerationMs?: number,
    /** Higher is scheduled first and may preempt lower-priority running requests. Default 0. */
    priority?: number,
    /** Keep generating past end-of-sequence tokens (like vLLM's `ignore_eos`), for exact output lengths. */
    ignoreEos?: boolean,
    /**
     * false: reuse no cached prefix (neither a sequence's tokens nor the prompt cache's): the whole prompt is evaluated,
     * as llama.cpp's `cache_prompt: false` asks (for results that do not depend on what ran before). Default true.
     */
    reusePrefix?: boolean,
    /**
     * The LoRA adapters' scales for this request, one per adapter (EngineInfo.loraAdapters; llama-server's per-request
     * `lora`). Absent: the server's scales when it starts. node-llama-cpp applies adapters to the whole context, so a
     * request with other scales than the running ones waits until they are done, and the requests behind it wait too
     * (llama-server batches no requests with different adapters together either).
     */
    loraScales?: number[],
    /**
     * Run on this sequence only (0 … parallel − 1; llama.cpp's `id_slot`): the request waits until it is free, while
     * later requests may start on other free sequences; it preempts nothing. Absent: any sequence.
     */
    sequence?: number,
    /** Test-only: busy-block the engine's main thread for this many ms before scheduling (needs `allowDebugRequests`). */
    debugBlockMs?: number
};

/**
 * Repetition penalties as llama.cpp's sampler applies them (its server's `repeat_penalty`,
 * `presence_penalty`, `frequency_penalty`, `repeat_last_n`): over the last `lastTokens` tokens of the
 * request's prompt and output.
 */
export type SamplingPenalties = {
    /** Logits of tokens in the window are divided by this (positive ones; negative ones multiplied): > 0, 1 = off. */
    repeat?: number,
    /** Subtracted once from the logit of every token in the window (−2…2, as OpenAI's `presence_penalty`). */
    presence?: number,
    /** Subtracted from a token's logit once per time it occurs in the window (−2…2, as OpenAI's `frequency_penalty`). */
    frequency?: number,
    /** The window: the last N tokens (default 64, as llama.cpp's); 0 = no penalties; −1 = the sequence's whole context. */
    lastTokens?: number
};

/**
 * llama.cpp's DRY sampler (its server's `dry_*` fields): a token that would extend a repetition longer than
 * `allowedLength` tokens of the last `lastTokens` (−1: the context) is penalized by multiplier × base^(length −
 * allowedLength); the sequence breakers' text interrupts repetitions. node-llama-cpp's sampler sees the output's tokens,
 * not the prompt's.
 */
export type DryPenalty = {multiplier: number, base: number, allowedLength: number, lastTokens: number, sequenceBreakers: string[]};
/**
 * llama.cpp's XTC sampler (its server's `xtc_probability`, `xtc_threshold`): with this probability per token, the tokens
 * at least `threshold` likely are removed, all but the least likely of them.
 */
export type ExcludeTopChoices = {probability: number, threshold: number};
/** The most DRY sequence breakers a request may give, and their longest (characters). */
export const maxDrySequenceBreakers = 64;
export const maxDrySequenceBreakerLength = 100;

/** One alternative at a token's position: its text and natural-log probability (in a scored prompt also its id). */
export type TopLogprob = {token: string, logprob: number, id?: number};
/**
 * A generated token's text and natural-log probability under the distribution it was sampled from (after
 * top-k, top-p, min-p and temperature; the model's own at temperature 0), with the `top` most likely tokens
 * there. Impossible tokens read −9999 (JSON has no −Infinity), as OpenAI's API reports them.
 */
export type TokenLogprob = {
    token: string, logprob: number, top: TopLogprob[],
    /**
     * The token's id; in a scored prompt (PromptLogprobs) also its `rank` in the distribution (1: the most likely), as
     * vLLM's prompt_logprobs give them.
     */
    id?: number, rank?: number
};
/**
 * What a client that tokenizes for the server needs to know (vLLM's `/tokenizer_info`): the text of the BOS and EOS
 * tokens (absent: the vocabulary has none), whether a text prompt begins with BOS, and the GGUF's chat template.
 */
export type TokenizerInfo = {bos?: string, eos?: string, addBos: boolean, chatTemplate?: string};

/**
 * llama.cpp's `/infill` input beyond prefix and suffix: the cursor's line up to the cursor, other files' code, and the
 * tokens to keep free for the answer when that code fills the context (the request's `n_predict`; 0 without one, as
 * llama-server with its default `-n`).
 */
export type InfillContext = {cursorLine: string, extra: Array<{filename: string, text: string}>, reserveTokens: number};
/** The most other-file chunks an infill request may carry. */
export const maxInfillChunks = 1024;

/** A scored prompt (GenerateRequest.promptLogprobs): its first token's text, which has no log-probability, and the others' entries. */
export type PromptLogprobs = {first: string, logprobs: TokenLogprob[]};
/** The most alternatives per token a request may ask for (OpenAI's `top_logprobs` bound). */
export const maxTopLogprobs = 20;
/** The floor of reported log-probabilities. */
export const minLogprob = -9999;

/**
 * Structured output, sampled under a grammar: JSON (any object), JSON that fits a schema, or text that a GBNF grammar
 * (llama.cpp's grammar format, whose rule `root` is the output) accepts.
 */
export type ResponseFormat = {type: "json_object"} | {type: "json_schema", schema: JsonObject} | {type: "grammar", grammar: string};
export const responseFormatTypes = ["json_object", "json_schema", "grammar"] as const;
/** The longest GBNF grammar a request may give (characters). */
export const maxGrammarLength = 65536;

/** `bias` (−100…100) is added to token `token`'s logit; −100 in effect bans it, 100 in effect forces it. */
export type LogitBias = {token: number, bias: number};
/** `bias` (−100…100) is added to the logit of each token of `text` (once per time the text has it, as llama.cpp adds). */
export type TextBias = {text: string, bias: number};
/** The longest text a `textBias` entry may have (characters). */
export const maxTextBiasLength = 1000;

/** The most token ids one request's `stopTokenIds` may list. */
export const maxStopTokenIds = 256;
/** The most words one request's `badWords` may list, and their longest (characters). */
export const maxBadWords = 256;
export const maxBadWordLength = 1000;

/** The most entries one request's `logitBias` may have, and the bound of each bias (OpenAI's: ±100). */
export const maxLogitBiasEntries = 1024;
export const maxLogitBias = 100;
/** OpenAI's bound of `presence_penalty` and `frequency_penalty`. */
export const maxAdditivePenalty = 2;
/** The default penalty window (llama.cpp's `repeat_last_n`). */
export const defaultPenaltyLastTokens = 64;

/** What a chat request's prompt is rendered from. */
export type ChatPromptInput = Pick<GenerateRequest, "tools" | "continueFinalMessage"> & {messages: ChatMessage[]};

/**
 * An embedding: the model's pooled hidden state for `text` (tokenized as a prompt is) or for token ids `tokens`, as
 * the model's pooling gives it (the last token's for a generative model), not normalized. A request like any other —
 * queued, scheduled, finished with the vector — evaluated on a context of its own, one at a time.
 */
export type EmbedRequest = {
    id: string,
    text?: string,
    tokens?: number[],
    /** Keep the input's first tokens that fit the context, instead of refusing a longer input. Default false. */
    truncate?: boolean
};

export type HostToEngine =
    | {type: "generate", request: GenerateRequest}
    | {type: "embed", request: EmbedRequest}
    | {type: "cancel", id: string}
    | {type: "ping", seq: number, hostTime: number}
    /** How many tokens the model's own tokenizer makes of `text` (VS Code's `provideTokenCount`); answered by `tokenCount`. */
    | {type: "countTokens", seq: number, text: string}
    /**
     * The model's token ids for `text` (with `specialTokens`, its special tokens' text is read as those tokens), or for
     * the prompt a chat request with `chat`'s messages (and tools) would evaluate; with `pieces`, each token's text too.
     * Answered by `tokenized`.
     */
    | {type: "tokenize", seq: number, text?: string, chat?: ChatPromptInput, specialTokens: boolean, pieces: boolean,
        /**
         * With `text`: tokenized as a completion's text prompt (BOS first where the vocabulary asks for it, special
         * tokens parsed; `specialTokens` does not apply). Default false: the text alone.
         */
        asPrompt?: boolean}
    /** The tokenizer's special tokens and chat template; answered by `tokenizerInfo`. */
    | {type: "tokenizerInfo", seq: number}
    /** The text of these token ids (special tokens' text included); answered by `detokenized`. */
    | {type: "detokenize", seq: number, tokens: number[]}
    /**
     * llama-server's slot actions on one sequence, once no request runs on it (until then the action waits): save its
     * state to `file`, restore its state from `file`, or erase what it holds. Answered by `slotActionDone`.
     */
    | {type: "slotAction", seq: number, action: SlotAction, sequence: number, file?: string}
    /**
     * llama-server's `POST /lora-adapters`: every adapter's new scale (by id), applied once no request runs (until then no
     * request starts). Answered by `loraScalesSet`.
     */
    | {type: "setLoraScales", seq: number, scales: number[]}
    | {type: "shutdown"};

export const slotActions = ["save", "restore", "erase"] as const;
export type SlotAction = typeof slotActions[number];

/**
 * What the host writes to the engine process: one message, or every message it sent in one event-loop
 * turn, in order. The engine handles a batch in one go, so requests sent together (a wave of closed-loop
 * clients, a burst of HTTP requests) are admitted together and start in one batch, instead of the first
 * of them starting alone because the pipe happened to be read between two writes.
 */
export type HostToEngineFrame = HostToEngine | {type: "batch", messages: HostToEngine[]};

/** The most messages one batch frame carries (the host splits a longer turn's worth). */
export const maxBatchMessages = 1024;

export const gpuBackends = ["cuda", "vulkan", "metal", "cpu"] as const;
export type GpuBackend = typeof gpuBackends[number];
const gpuOnlyBackends = ["cuda", "vulkan", "metal"] as const satisfies readonly GpuBackend[];

export const engineLogLevels = ["info", "warn", "error"] as const;
export type EngineLogLevel = typeof engineLogLevels[number];

export type ModelInfo = {
    path: string,
    name: string,
    architecture: string,
    parameterCount: number,
    quantization: string,
    sizeBytes: number,
    trainContextLength: number,
    /** Tokens in the model's vocabulary (`tokenizer.ggml.tokens`); absent when the file does not list them. */
    vocabularySize?: number,
    /** Whether requests may offer it tools: it has a chat template to render them with. Absent: no. */
    toolCalling?: boolean,
    /** Whether it has fill-in-the-middle tokens (a request's `suffix`). Absent: no. */
    fillInMiddle?: boolean,
    /** Whether its chat template has a reasoning (thought) segment, such as `<think>…</think>`. Absent: no. */
    reasoning?: boolean
};

/** A GPU backend that failed the engine's self-test under gpu "auto", so the next one (or the CPU) was used. */
export type GpuFallback = {backend: Exclude<GpuBackend, "cpu">, reason: string};

export type EngineInfo = {
    pid: number,
    backend: GpuBackend,
    gpuDevices: string[],
    /** GPU backends skipped because they failed the self-test (engine/gpu/gpuSelfTest.ts), in the order tried. */
    gpuFallbacks: GpuFallback[],
    vramTotalBytes: number,
    vramUsedBytes: number,
    model: ModelInfo,
    contextSize: number,
    parallel: number,
    threads: number,
    /** Whether a request reuses the KV cache of the longest matching prefix left on a free sequence. */
    prefixCache: boolean,
    /**
     * Whether a short rest of a prompt deep in a reused prefix may take cached tokens along so that attention runs in tiles
     * (EngineOptions.tilePadding: on, the CPU backend, prefix caching and flash attention, and a model shape it can cost).
     */
    tilePadding: boolean,
    /** The prompt cache's limit in MiB (EngineOptions.promptCacheMiB); 0: off. */
    promptCacheMiB: number,
    /** Chunked prefill's budget in effect: prompt tokens per step while other requests decode (EngineOptions.prefillChunkTokens). */
    prefillChunkTokens: number,
    /** The LoRA adapters applied to every request (EngineOptions.loraAdapters); empty: none. */
    loraAdapters: LoraAdapter[],
    statsIntervalMs: number,
    loadMs: number
};

export type RequestEvent =
    /** The request's input is tokenized and fits; `promptTokenIds` with GenerateRequest.returnTokenIds. */
    | {kind: "inputProcessed", id: string, t: number, promptTokens: number, promptTokenIds?: number[]}
    | {kind: "queued", id: string, t: number}
    /**
     * Put on a sequence: first, and again when resuming after a preemption. `sequence`: which one (0 … parallel − 1;
     * absent for an embedding, which runs on a context of its own). `cachedTokens`: leading prompt tokens already in that
     * sequence's KV cache from an earlier request (prefix caching), so only the rest was evaluated; 0 when caching is off.
     * `restoredTokens`: of those, the ones restored from the prompt cache (EngineOptions.promptCacheMiB) rather
     * than found on the sequence; present only when the prompt cache is on (0: it had nothing better).
     */
    | {kind: "scheduled", id: string, t: number, cachedTokens: number, restoredTokens?: number, sequence?: number}
    /**
     * A piece of a prompt evaluated in chunks (chunked prefill, or a prompt scored piece by piece) is in the KV cache:
     * `processedTokens` prompt tokens are there now, the cached prefix included (llama-server's prompt progress). A prompt
     * evaluated in one go has none; its first token ends it.
     */
    | {kind: "prefilled", id: string, t: number, processedTokens: number}
    /**
     * Generated tokens since the last event of this request: `times[i]` is when token i was sampled; `text` is their
     * stable text; `reasoning` the part of it that is the model's reasoning (`separateReasoning`), not in `text`;
     * `logprobs[i]` token i's log-probability, for a request that asked for them; `ids[i]` its id, for one that asked
     * for ids (GenerateRequest.returnTokenIds).
     */
    | {kind: "tokens", id: string, text: string, reasoning?: string, times: number[], logprobs?: TokenLogprob[], ids?: number[]}
    | {kind: "preempted", id: string, t: number}
    /**
     * A scored prompt (GenerateRequest.promptLogprobs), when its evaluation ended: `first` is its first token's text
     * (which has no log-probability), `logprobs[i]` token i + 1's. Token texts include special tokens' (BOS), as vLLM's echo.
     */
    | {kind: "promptLogprobs", id: string, t: number, first: string, logprobs: TokenLogprob[]}
    /**
     * `toolCalls`: the calls parsed out of the output of a request with tools (their text is not in any `tokens` event's text).
     * `reasoningTokens`: of the generated tokens, those of the reasoning, for a request whose reasoning was separated.
     * `stopString`: the request's stop string that ended it (reason `stop`), when one did; `stopTokenId`: the token of its
     * `stopTokenIds` that did.
     * `embedding`: an embed request's vector (reason `stop`).
     */
    | {kind: "finished", id: string, t: number, reason: FinishReason, promptTokens: number, generatedTokens: number, error?: string, errorCode?: RequestErrorCode,
        toolCalls?: GeneratedToolCall[], reasoningTokens?: number, stopString?: string, stopTokenId?: number, embedding?: number[]};

/** A tool call as the engine parsed it; the server in front gives it its id. */
export type GeneratedToolCall = Omit<ToolCall, "id">;

export type RequestEventKind = RequestEvent["kind"];

/** Engine state after the step that produced a batch of outputs; travels with those outputs. */
export type StepStats = {
    t: number,
    running: number,
    waiting: number,
    /** Tokens evaluated since the previous step message (prompt + generated). */
    stepTokens: number,
    kvUsedTokens: number,
    kvCapacityTokens: number
};

export type EngineErrorInfo = {name: string, code?: string, message: string};

export type EngineToHost =
    | {type: "loading", progress: number}
    | {type: "ready", info: EngineInfo}
    | {type: "loadFailed", error: EngineErrorInfo}
    | {type: "outputs", events: RequestEvent[], step: StepStats}
    | {type: "pong", seq: number, hostTime: number, engineTime: number}
    /** `count` tokens, or (count -1) why it could not count. */
    | {type: "tokenCount", seq: number, count: number, error?: string}
    /**
     * `tokens` with each one's text (`pieces`, when asked for; else empty), or why not (`error`, then both empty). For a
     * chat input also its prompt as text (`text`: the template's output, special tokens written out).
     */
    | {type: "tokenized", seq: number, tokens: number[], pieces: string[], text?: string, error?: string}
    | {type: "detokenized", seq: number, text: string, error?: string}
    | {type: "tokenizerInfo", seq: number, info: TokenizerInfo}
    /**
     * A slot action done: the tokens the sequence held when saved or erased, or holds once restored; the bytes written or
     * read; how long it took. Or why not (`error`; `errorCode` invalid_request: the file or the sequence, not the engine).
     */
    | {type: "slotActionDone", seq: number, tokens: number, bytes: number, ms: number, error?: string, errorCode?: RequestErrorCode}
    /** The adapters with the scales they now run with; or why not (`error`, the adapters as they were). */
    | {type: "loraScalesSet", seq: number, adapters: LoraAdapter[], error?: string}
    | {type: "rejected", reason: string}
    | {type: "log", level: EngineLogLevel, message: string};

const maxIdLength = 200;
/** The longest text `countTokens` takes (characters). */
export const maxCountTokensText = 4 << 20;
/**
 * At most this many stop strings per request, each at most this long. OpenAI's API takes 4; vLLM and llama.cpp
 * set no bound, and coding assistants send more (Continue's autocomplete: its FIM template's 7–9 plus its own
 * 3, more for some models), so the bound is only against abuse.
 */
export const maxStopStrings = 64;
export const maxStopLength = 1000;

function parseToolCall(value: unknown, what: string): ToolCall {
    const obj = expectObject(value, what);
    return {id: expectString(obj, "id", what, maxIdLength), name: expectString(obj, "name", what, 64), arguments: expectString(obj, "arguments", what)};
}

function parseChatMessage(value: unknown, index: number): ChatMessage {
    const what = `messages[${index}]`;
    const obj = expectObject(value, what);
    const message: ChatMessage = {role: expectOneOf(obj, "role", chatRoles, what), content: expectString(obj, "content", what)};
    if (obj.toolCalls !== undefined)
        message.toolCalls = expectArray(obj, "toolCalls", what, maxTools).map((call, i) => parseToolCall(call, `${what}.toolCalls[${i}]`));
    const toolCallId = optionalString(obj, "toolCallId", what);
    if (toolCallId !== undefined) message.toolCallId = toolCallId;
    const reasoning = optionalString(obj, "reasoning", what);
    if (reasoning !== undefined) message.reasoning = reasoning;
    return message;
}

function parseToolDefinition(value: unknown, index: number): ToolDefinition {
    const what = `request.tools[${index}]`;
    const obj = expectObject(value, what);
    const tool: ToolDefinition = {name: expectString(obj, "name", what, 64)};
    const description = optionalString(obj, "description", what);
    if (description !== undefined) tool.description = description;
    if (obj.parameters !== undefined) tool.parameters = expectObject(obj.parameters, `${what}.parameters`);
    return tool;
}

function parseToolChoice(value: unknown): ToolChoice {
    if (value === "auto" || value === "required")
        return value;
    return {name: expectString(expectObject(value, "request.toolChoice"), "name", "request.toolChoice", 64)};
}

function parsePenalties(value: unknown): SamplingPenalties {
    const obj = expectObject(value, "request.penalties");
    const what = "request.penalties";
    const penalties: SamplingPenalties = {};
    const repeat = optionalNumber(obj, "repeat", what);
    if (repeat !== undefined) penalties.repeat = repeat;
    const presence = optionalNumber(obj, "presence", what);
    if (presence !== undefined) penalties.presence = presence;
    const frequency = optionalNumber(obj, "frequency", what);
    if (frequency !== undefined) penalties.frequency = frequency;
    const lastTokens = optionalInteger(obj, "lastTokens", what);
    if (lastTokens !== undefined) penalties.lastTokens = lastTokens;
    return penalties;
}

/** `obj[key]`: token ids (integers; whether the model has them is the engine's check). */
function expectTokenIds(obj: JsonObject, key: string, what: string): number[] {
    return expectArray(obj, key, what, maxCountTokensText).map((token, i) => {
        if (typeof token !== "number" || !Number.isSafeInteger(token))
            throw new ProtocolError(`${what}.${key}[${i}]: expected an integer`);
        return token;
    });
}

function parseGenerateRequest(value: unknown): GenerateRequest {
    const obj = expectObject(value, "request");
    const what = "request";
    const prompt = optionalString(obj, "prompt", what);
    const messages = obj.messages === undefined ? undefined : expectArray(obj, "messages", what, 10_000).map(parseChatMessage);
    const promptTokens = obj.promptTokens === undefined ? undefined : expectTokenIds(obj, "promptTokens", what);
    if ([prompt, messages, promptTokens].filter((input) => input !== undefined).length !== 1)
        throw new ProtocolError("request: give exactly one of prompt, promptTokens and messages");
    const request: GenerateRequest = {
        id: expectString(obj, "id", what, maxIdLength),
        maxTokens: expectInteger(obj, "maxTokens", what)
    };
    if (prompt !== undefined) request.prompt = prompt;
    if (promptTokens !== undefined) request.promptTokens = promptTokens;
    if (messages !== undefined) request.messages = messages;
    const clampMaxTokens = optionalBoolean(obj, "clampMaxTokens", what);
    if (clampMaxTokens !== undefined) request.clampMaxTokens = clampMaxTokens;
    const temperature = optionalNumber(obj, "temperature", what);
    if (temperature !== undefined) request.temperature = temperature;
    const topP = optionalNumber(obj, "topP", what);
    if (topP !== undefined) request.topP = topP;
    const topK = optionalInteger(obj, "topK", what);
    if (topK !== undefined) request.topK = topK;
    const minP = optionalNumber(obj, "minP", what);
    if (minP !== undefined) request.minP = minP;
    if (obj.penalties !== undefined)
        request.penalties = parsePenalties(obj.penalties);
    const logprobs = optionalInteger(obj, "logprobs", what);
    if (logprobs !== undefined) request.logprobs = logprobs;
    const promptLogprobs = optionalInteger(obj, "promptLogprobs", what);
    if (promptLogprobs !== undefined) request.promptLogprobs = promptLogprobs;
    if (optionalBoolean(obj, "returnTokenIds", what) === true) request.returnTokenIds = true;
    if (optionalBoolean(obj, "includeStopString", what) === true) request.includeStopString = true;
    if (obj.stopTokenIds !== undefined) {
        const ids = expectNumberArray(obj, "stopTokenIds", what);
        if (ids.length > maxStopTokenIds || !ids.every((id) => Number.isInteger(id) && id >= 0))
            throw new ProtocolError(`${what}.stopTokenIds: expected at most ${maxStopTokenIds} token ids (non-negative integers)`);
        request.stopTokenIds = ids;
    }
    const minTokens = optionalInteger(obj, "minTokens", what);
    if (minTokens !== undefined) {
        if (minTokens < 0)
            throw new ProtocolError(`${what}.minTokens: must be ≥ 0, got ${minTokens}`);
        request.minTokens = minTokens;
    }
    if (obj.dry !== undefined) {
        const dry = expectObject(obj.dry, "request.dry");
        request.dry = {multiplier: expectNumber(dry, "multiplier", "request.dry"), base: expectNumber(dry, "base", "request.dry"),
            allowedLength: expectInteger(dry, "allowedLength", "request.dry"), lastTokens: expectInteger(dry, "lastTokens", "request.dry"),
            sequenceBreakers: expectArray(dry, "sequenceBreakers", "request.dry", maxDrySequenceBreakers).map((value, index) => {
                if (typeof value !== "string" || value.length > maxDrySequenceBreakerLength)
                    throw new ProtocolError(`request.dry.sequenceBreakers[${index}]: expected a string of at most ${maxDrySequenceBreakerLength} characters`);
                return value;
            })};
    }
    if (obj.xtc !== undefined) {
        const xtc = expectObject(obj.xtc, "request.xtc");
        request.xtc = {probability: expectNumber(xtc, "probability", "request.xtc"), threshold: expectNumber(xtc, "threshold", "request.xtc")};
    }
    if (obj.badWords !== undefined)
        request.badWords = expectArray(obj, "badWords", what, maxBadWords).map((value, index) => {
            if (typeof value !== "string" || value.length > maxBadWordLength)
                throw new ProtocolError(`request.badWords[${index}]: expected a string of at most ${maxBadWordLength} characters`);
            return value;
        });
    if (optionalBoolean(obj, "outputSpecialTokens", what) === true) request.outputSpecialTokens = true;
    const truncatePromptTokens = optionalInteger(obj, "truncatePromptTokens", what);
    if (truncatePromptTokens !== undefined) {
        if (truncatePromptTokens < 1 && truncatePromptTokens !== -1)
            throw new ProtocolError(`${what}.truncatePromptTokens: must be ≥ 1, or −1 for a sequence's capacity; got ${truncatePromptTokens}`);
        request.truncatePromptTokens = truncatePromptTokens;
    }
    if (obj.responseFormat !== undefined) {
        const format = expectObject(obj.responseFormat, "request.responseFormat");
        const type = expectOneOf(format, "type", responseFormatTypes, "request.responseFormat");
        request.responseFormat = type === "json_object" ? {type}
            : type === "grammar" ? {type, grammar: expectString(format, "grammar", "request.responseFormat", maxGrammarLength)}
                : {type, schema: expectObject(format.schema, "request.responseFormat.schema")};
    }
    if (obj.logitBias !== undefined)
        request.logitBias = expectArray(obj, "logitBias", what, maxLogitBiasEntries).map((value, index) => {
            const entry = expectObject(value, `request.logitBias[${index}]`);
            return {token: expectInteger(entry, "token", `request.logitBias[${index}]`), bias: expectNumber(entry, "bias", `request.logitBias[${index}]`)};
        });
    if (obj.textBias !== undefined)
        request.textBias = expectArray(obj, "textBias", what, maxLogitBiasEntries).map((value, index) => {
            const entry = expectObject(value, `request.textBias[${index}]`);
            return {text: expectString(entry, "text", `request.textBias[${index}]`, maxTextBiasLength),
                bias: expectNumber(entry, "bias", `request.textBias[${index}]`)};
        });
    if (obj.stop !== undefined)
        request.stop = expectArray(obj, "stop", what, maxStopStrings).map((value, index) => {
            if (typeof value !== "string" || value === "" || value.length > maxStopLength)
                throw new ProtocolError(`request.stop[${index}]: expected a non-empty string of at most ${maxStopLength} characters`);
            return value;
        });
    if (obj.tools !== undefined) {
        if (messages === undefined)
            throw new ProtocolError("request.tools: only with messages");
        request.tools = expectArray(obj, "tools", what, maxTools).map(parseToolDefinition);
    }
    if (obj.toolChoice !== undefined) request.toolChoice = parseToolChoice(obj.toolChoice);
    const parallelToolCalls = optionalBoolean(obj, "parallelToolCalls", what);
    if (parallelToolCalls !== undefined) request.parallelToolCalls = parallelToolCalls;
    const continueFinalMessage = optionalBoolean(obj, "continueFinalMessage", what);
    if (continueFinalMessage !== undefined) request.continueFinalMessage = continueFinalMessage;
    const separateReasoning = optionalBoolean(obj, "separateReasoning", what);
    if (separateReasoning !== undefined) request.separateReasoning = separateReasoning;
    const allowReasoning = optionalBoolean(obj, "allowReasoning", what);
    if (allowReasoning !== undefined) request.allowReasoning = allowReasoning;
    const suffix = optionalString(obj, "suffix", what);
    if (suffix !== undefined) {
        if (prompt === undefined)
            throw new ProtocolError("request.suffix: only with prompt");
        request.suffix = suffix;
    }
    if (obj.infill !== undefined) {
        if (suffix === undefined)
            throw new ProtocolError("request.infill: only with prompt and suffix");
        const infill = expectObject(obj.infill, "request.infill");
        request.infill = {cursorLine: expectString(infill, "cursorLine", "request.infill"),
            reserveTokens: expectInteger(infill, "reserveTokens", "request.infill"),
            extra: expectArray(infill, "extra", "request.infill", maxInfillChunks).map((value, i) => {
                const chunk = expectObject(value, `request.infill.extra[${i}]`);
                return {filename: expectString(chunk, "filename", `request.infill.extra[${i}]`, 4096),
                    text: expectString(chunk, "text", `request.infill.extra[${i}]`)};
            })};
    }
    const minIndent = optionalInteger(obj, "minIndent", what);
    if (minIndent !== undefined) request.minIndent = minIndent;
    const maxGenerationMs = optionalNumber(obj, "maxGenerationMs", what);
    if (maxGenerationMs !== undefined) request.maxGenerationMs = maxGenerationMs;
    const seed = optionalInteger(obj, "seed", what);
    if (seed !== undefined) request.seed = seed;
    const priority = optionalNumber(obj, "priority", what);
    if (priority !== undefined) request.priority = priority;
    const ignoreEos = optionalBoolean(obj, "ignoreEos", what);
    if (ignoreEos !== undefined) request.ignoreEos = ignoreEos;
    const reusePrefix = optionalBoolean(obj, "reusePrefix", what);
    if (reusePrefix !== undefined) request.reusePrefix = reusePrefix;
    if (obj.loraScales !== undefined) request.loraScales = parseLoraScales(obj, "loraScales", what);
    const sequence = optionalInteger(obj, "sequence", what);
    if (sequence !== undefined) {
        if (sequence < 0)
            throw new ProtocolError(`${what}.sequence: ${sequence} is not a sequence index`);
        request.sequence = sequence;
    }
    const debugBlockMs = optionalNumber(obj, "debugBlockMs", what);
    if (debugBlockMs !== undefined) request.debugBlockMs = debugBlockMs;
    return request;
}

function parseEmbedRequest(value: unknown): EmbedRequest {
    const obj = expectObject(value, "embed.request");
    const what = "embed.request";
    const request: EmbedRequest = {id: expectString(obj, "id", what, maxIdLength)};
    const text = optionalString(obj, "text", what, maxCountTokensText);
    if (text !== undefined) request.text = text;
    if (obj.tokens !== undefined)
        request.tokens = expectTokenIds(obj, "tokens", what);
    if ((request.text === undefined) === (request.tokens === undefined))
        throw new ProtocolError(`${what}: exactly one of text and tokens`);
    const truncate = optionalBoolean(obj, "truncate", what);
    if (truncate !== undefined) request.truncate = truncate;
    return request;
}

/**
 * The messages of a frame arriving at the engine, each still to be validated with parseHostToEngine (so
 * one bad message in a batch is refused alone); throws ProtocolError for a malformed batch.
 */
export function hostToEngineFrameMessages(value: unknown): unknown[] {
    if (!isObject(value) || value.type !== "batch")
        return [value];
    const messages = expectArray(value, "messages", "batch", maxBatchMessages);
    if (messages.some((message) => isObject(message) && message.type === "batch"))
        throw new ProtocolError("batch.messages: a batch cannot contain a batch");
    return messages;
}

/** Validates a message arriving at the engine; throws ProtocolError. */
export function parseHostToEngine(value: unknown): HostToEngine {
    const obj = expectObject(value, "message");
    switch (obj.type) {
        case "generate": return {type: "generate", request: parseGenerateRequest(obj.request)};
        case "embed": return {type: "embed", request: parseEmbedRequest(obj.request)};
        case "cancel": return {type: "cancel", id: expectString(obj, "id", "cancel", maxIdLength)};
        case "ping": return {type: "ping", seq: expectInteger(obj, "seq", "ping"), hostTime: expectNumber(obj, "hostTime", "ping")};
        case "countTokens": return {type: "countTokens", seq: expectInteger(obj, "seq", "countTokens"),
            text: expectString(obj, "text", "countTokens", maxCountTokensText)};
        case "tokenize": {
            const message: HostToEngine = {type: "tokenize", seq: expectInteger(obj, "seq", "tokenize"),
                specialTokens: expectBoolean(obj, "specialTokens", "tokenize"), pieces: expectBoolean(obj, "pieces", "tokenize")};
            const text = optionalString(obj, "text", "tokenize", maxCountTokensText);
            if (text !== undefined) message.text = text;
            const asPrompt = optionalBoolean(obj, "asPrompt", "tokenize");
            if (asPrompt !== undefined) message.asPrompt = asPrompt;
            if (obj.chat !== undefined) {
                const chat = expectObject(obj.chat, "tokenize.chat");
                message.chat = {messages: expectArray(chat, "messages", "tokenize.chat", 10_000).map(parseChatMessage)};
                if (chat.tools !== undefined)
                    message.chat.tools = expectArray(chat, "tools", "tokenize.chat", maxTools).map(parseToolDefinition);
                const continueFinalMessage = optionalBoolean(chat, "continueFinalMessage", "tokenize.chat");
                if (continueFinalMessage !== undefined) message.chat.continueFinalMessage = continueFinalMessage;
            }
            return message;
        }
        case "detokenize": return {type: "detokenize", seq: expectInteger(obj, "seq", "detokenize"), tokens: expectTokenIds(obj, "tokens", "detokenize")};
        case "tokenizerInfo": return {type: "tokenizerInfo", seq: expectInteger(obj, "seq", "tokenizerInfo")};
        case "slotAction": {
            const message: HostToEngine = {type: "slotAction", seq: expectInteger(obj, "seq", "slotAction"),
                action: expectOneOf(obj, "action", slotActions, "slotAction"), sequence: expectInteger(obj, "sequence", "slotAction")};
            const file = optionalString(obj, "file", "slotAction", 4096);
            if (message.action !== "erase" && file === undefined)
                throw new ProtocolError(`slotAction.file: required to ${message.action}`);
            return file === undefined ? message : {...message, file};
        }
        case "setLoraScales": return {type: "setLoraScales", seq: expectInteger(obj, "seq", "setLoraScales"),
            scales: parseLoraScales(obj, "scales", "setLoraScales")};
        case "shutdown": return {type: "shutdown"};
        default: throw new ProtocolError(`unknown message type ${JSON.stringify(String(obj.type)).slice(0, 80)}`);
    }
}

function parseTopLogprob(value: unknown): TopLogprob {
    const what = "event.logprobs[].top[]";
    const obj = expectObject(value, what);
    const id = optionalInteger(obj, "id", what);
    return {token: expectString(obj, "token", what, 1000), logprob: expectNumber(obj, "logprob", what), ...id !== undefined ? {id} : {}};
}

function parseTokenLogprob(value: unknown): TokenLogprob {
    const what = "event.logprobs[]";
    const obj = expectObject(value, what);
    const id = optionalInteger(obj, "id", what);
    const rank = optionalInteger(obj, "rank", what);
    return {token: expectString(obj, "token", what, 1000), logprob: expectNumber(obj, "logprob", what),
        top: expectArray(obj, "top", what, maxTopLogprobs).map(parseTopLogprob), ...id !== undefined ? {id} : {}, ...rank !== undefined ? {rank} : {}};
}

/** Token ids: non-negative integers. */
function tokenIdArray(obj: JsonObject, key: string, what: string): number[] {
    const ids = expectNumberArray(obj, key, what);
    if (!ids.every((id) => Number.isInteger(id) && id >= 0))
        throw new ProtocolError(`${what}.${key}: expected token ids (non-negative integers)`);
    return ids;
}

const requestEventKinds: readonly RequestEventKind[] = ["inputProcessed", "queued", "scheduled", "prefilled", "tokens", "preempted", "promptLogprobs",
    "finished"];

function parseRequestEvent(value: unknown): RequestEvent {
    const obj = expectObject(value, "event");
    const what = "event";
    const kind = expectOneOf(obj, "kind", requestEventKinds, what);
    const id = expectString(obj, "id", what, maxIdLength);
    switch (kind) {
        case "tokens": {
            const times = expectNumberArray(obj, "times", what);
            const event: RequestEvent = {kind, id, text: expectString(obj, "text", what), times};
            const reasoning = optionalString(obj, "reasoning", what);
            if (reasoning !== undefined) event.reasoning = reasoning;
            if (obj.logprobs !== undefined) {
                const logprobs = expectArray(obj, "logprobs", what, times.length).map(parseTokenLogprob);
                if (logprobs.length !== times.length)
                    throw new ProtocolError(`event.logprobs: ${logprobs.length} entries for ${times.length} tokens`);
                event.logprobs = logprobs;
            }
            if (obj.ids !== undefined) {
                const ids = tokenIdArray(obj, "ids", what);
                if (ids.length !== times.length)
                    throw new ProtocolError(`event.ids: ${ids.length} ids for ${times.length} tokens`);
                event.ids = ids;
            }
            return event;
        }
        case "inputProcessed": {
            const event: RequestEvent = {kind, id, t: expectNumber(obj, "t", what), promptTokens: expectInteger(obj, "promptTokens", what)};
            if (obj.promptTokenIds !== undefined) {
                const ids = tokenIdArray(obj, "promptTokenIds", what);
                if (ids.length !== event.promptTokens)
                    throw new ProtocolError(`event.promptTokenIds: ${ids.length} ids for ${event.promptTokens} prompt tokens`);
                event.promptTokenIds = ids;
            }
            return event;
        }
        case "promptLogprobs": return {kind, id, t: expectNumber(obj, "t", what), first: expectString(obj, "first", what, 1000),
            logprobs: expectArray(obj, "logprobs", what).map(parseTokenLogprob)};
        case "scheduled": {
            const cachedTokens = expectInteger(obj, "cachedTokens", what);
            const restoredTokens = optionalInteger(obj, "restoredTokens", what);
            if (restoredTokens !== undefined && (restoredTokens < 0 || restoredTokens > cachedTokens))
                throw new ProtocolError(`${what}.restoredTokens: ${restoredTokens} is not between 0 and cachedTokens (${cachedTokens})`);
            const sequence = optionalInteger(obj, "sequence", what);
            if (sequence !== undefined && sequence < 0)
                throw new ProtocolError(`${what}.sequence: ${sequence} is not a sequence index`);
            return {kind, id, t: expectNumber(obj, "t", what), cachedTokens, ...(restoredTokens !== undefined ? {restoredTokens} : {}),
                ...(sequence !== undefined ? {sequence} : {})};
        }
        case "prefilled": {
            const processedTokens = expectInteger(obj, "processedTokens", what);
            if (processedTokens < 0)
                throw new ProtocolError(`${what}.processedTokens: ${processedTokens} is negative`);
            return {kind, id, t: expectNumber(obj, "t", what), processedTokens};
        }
        case "finished": {
            const event: RequestEvent = {
                kind, id, t: expectNumber(obj, "t", what), reason: expectOneOf(obj, "reason", finishReasons, what),
                promptTokens: expectInteger(obj, "promptTokens", what), generatedTokens: expectInteger(obj, "generatedTokens", what)
            };
            const error = optionalString(obj, "error", what);
            if (error !== undefined) event.error = error;
            if (obj.errorCode !== undefined) event.errorCode = expectOneOf(obj, "errorCode", requestErrorCodes, what);
            if (obj.toolCalls !== undefined)
                event.toolCalls = expectArray(obj, "toolCalls", what, maxTools).map((call, i) => {
                    const entry = expectObject(call, `${what}.toolCalls[${i}]`);
                    return {name: expectString(entry, "name", `${what}.toolCalls[${i}]`, 64), arguments: expectString(entry, "arguments", `${what}.toolCalls[${i}]`)};
                });
            const reasoningTokens = optionalInteger(obj, "reasoningTokens", what);
            if (reasoningTokens !== undefined) event.reasoningTokens = reasoningTokens;
            const stopString = optionalString(obj, "stopString", what);
            if (stopString !== undefined) event.stopString = stopString;
            const stopTokenId = optionalInteger(obj, "stopTokenId", what);
            if (stopTokenId !== undefined) event.stopTokenId = stopTokenId;
            if (obj.embedding !== undefined) event.embedding = expectNumberArray(obj, "embedding", what);
            return event;
        }
        default: return {kind, id, t: expectNumber(obj, "t", what)};
    }
}

function parseStepStats(value: unknown): StepStats {
    const obj = expectObject(value, "step");
    return {
        t: expectNumber(obj, "t", "step"),
        running: expectInteger(obj, "running", "step"),
        waiting: expectInteger(obj, "waiting", "step"),
        stepTokens: expectInteger(obj, "stepTokens", "step"),
        kvUsedTokens: expectInteger(obj, "kvUsedTokens", "step"),
        kvCapacityTokens: expectInteger(obj, "kvCapacityTokens", "step")
    };
}

/** `obj[key]`: the GPU backends skipped for failing the self-test (EngineInfo, and EngineOptions.gpuTested). */
export function parseGpuFallbacks(obj: Record<string, unknown>, key: string, what: string): GpuFallback[] {
    return expectArray(obj, key, what, 8).map((item) => {
        const fallback = expectObject(item, `${what}.${key}[]`);
        return {backend: expectOneOf(fallback, "backend", gpuOnlyBackends, `${what}.${key}[]`),
            reason: expectString(fallback, "reason", `${what}.${key}[]`, 4096)};
    });
}

export function parseEngineInfo(value: unknown): EngineInfo {
    const obj = expectObject(value, "info");
    const model = expectObject(obj.model, "info.model");
    const gpuDevices = expectArray(obj, "gpuDevices", "info", 64);
    if (!gpuDevices.every((name) => typeof name === "string"))
        throw new ProtocolError("info.gpuDevices: expected strings");
    const vocabularySize = optionalInteger(model, "vocabularySize", "info.model");
    const toolCalling = optionalBoolean(model, "toolCalling", "info.model");
    const fillInMiddle = optionalBoolean(model, "fillInMiddle", "info.model");
    const reasoning = optionalBoolean(model, "reasoning", "info.model");
    return {
        pid: expectInteger(obj, "pid", "info"),
        backend: expectOneOf(obj, "backend", gpuBackends, "info"),
        gpuDevices: gpuDevices as string[],
        gpuFallbacks: parseGpuFallbacks(obj, "gpuFallbacks", "info"),
        vramTotalBytes: expectNumber(obj, "vramTotalBytes", "info"),
        vramUsedBytes: expectNumber(obj, "vramUsedBytes", "info"),
        model: {
            path: expectString(model, "path", "info.model"),
            name: expectString(model, "name", "info.model"),
            architecture: expectString(model, "architecture", "info.model"),
            parameterCount: expectNumber(model, "parameterCount", "info.model"),
            quantization: expectString(model, "quantization", "info.model"),
            sizeBytes: expectNumber(model, "sizeBytes", "info.model"),
            trainContextLength: expectInteger(model, "trainContextLength", "info.model"),
            ...(vocabularySize !== undefined ? {vocabularySize} : {}),
            ...(toolCalling !== undefined ? {toolCalling} : {}),
            ...(fillInMiddle !== undefined ? {fillInMiddle} : {}),
            ...(reasoning !== undefined ? {reasoning} : {})
        },
        contextSize: expectInteger(obj, "contextSize", "info"),
        parallel: expectInteger(obj, "parallel", "info"),
        threads: expectInteger(obj, "threads", "info"),
        prefixCache: expectBoolean(obj, "prefixCache", "info"),
        tilePadding: expectBoolean(obj, "tilePadding", "info"),
        promptCacheMiB: expectInteger(obj, "promptCacheMiB", "info"),
        prefillChunkTokens: expectInteger(obj, "prefillChunkTokens", "info"),
        loraAdapters: parseLoraAdapters(obj, "loraAdapters", "info"),
        statsIntervalMs: expectNumber(obj, "statsIntervalMs", "info"),
        loadMs: expectNumber(obj, "loadMs", "info")
    };
}

function parseErrorInfo(value: unknown): EngineErrorInfo {
    const obj = expectObject(value, "error");
    const info: EngineErrorInfo = {name: expectString(obj, "name", "error"), message: expectString(obj, "message", "error")};
    const code = optionalString(obj, "code", "error");
    if (code !== undefined) info.code = code;
    return info;
}

/** Validates a message arriving at the host from the engine; throws ProtocolError. */
export function parseEngineToHost(value: unknown): EngineToHost {
    const obj: JsonObject = expectObject(value, "message");
    switch (obj.type) {
        case "outputs": return {type: "outputs", events: expectArray(obj, "events", "outputs").map(parseRequestEvent), step: parseStepStats(obj.step)};
        case "loading": return {type: "loading", progress: expectNumber(obj, "progress", "loading")};
        case "ready": return {type: "ready", info: parseEngineInfo(obj.info)};
        case "loadFailed": return {type: "loadFailed", error: parseErrorInfo(obj.error)};
        case "pong": return {type: "pong", seq: expectInteger(obj, "seq", "pong"), hostTime: expectNumber(obj, "hostTime", "pong"), engineTime: expectNumber(obj, "engineTime", "pong")};
        case "tokenized": {
            const tokens = expectTokenIds(obj, "tokens", "tokenized");
            const pieces = expectArray(obj, "pieces", "tokenized", maxCountTokensText).map((piece, i) => {
                if (typeof piece !== "string")
                    throw new ProtocolError(`tokenized.pieces[${i}]: expected a string`);
                return piece;
            });
            const error = optionalString(obj, "error", "tokenized", 2000);
            const text = optionalString(obj, "text", "tokenized", maxCountTokensText);
            return {type: "tokenized", seq: expectInteger(obj, "seq", "tokenized"), tokens, pieces, ...text !== undefined ? {text} : {},
                ...error !== undefined ? {error} : {}};
        }
        case "tokenizerInfo": {
            const info = expectObject(obj.info, "tokenizerInfo.info");
            const bos = optionalString(info, "bos", "tokenizerInfo.info", 1000);
            const eos = optionalString(info, "eos", "tokenizerInfo.info", 1000);
            const chatTemplate = optionalString(info, "chatTemplate", "tokenizerInfo.info", maxCountTokensText);
            return {type: "tokenizerInfo", seq: expectInteger(obj, "seq", "tokenizerInfo"), info: {
                addBos: expectBoolean(info, "addBos", "tokenizerInfo.info"), ...bos !== undefined ? {bos} : {},
                ...eos !== undefined ? {eos} : {}, ...chatTemplate !== undefined ? {chatTemplate} : {}}};
        }
        case "detokenized": {
            const error = optionalString(obj, "error", "detokenized", 2000);
            return {type: "detokenized", seq: expectInteger(obj, "seq", "detokenized"), text: expectString(obj, "text", "detokenized"),
                ...error !== undefined ? {error} : {}};
        }
        case "tokenCount": {
            const message: EngineToHost = {type: "tokenCount", seq: expectInteger(obj, "seq", "tokenCount"), count: expectInteger(obj, "count", "tokenCount")};
            const error = optionalString(obj, "error", "tokenCount", 2000);
            return error === undefined ? message : {...message, error};
        }
        case "loraScalesSet": {
            const error = optionalString(obj, "error", "loraScalesSet", 2000);
            return {type: "loraScalesSet", seq: expectInteger(obj, "seq", "loraScalesSet"), adapters: parseLoraAdapters(obj, "adapters", "loraScalesSet"),
                ...error !== undefined ? {error} : {}};
        }
        case "slotActionDone": {
            const what = "slotActionDone";
            const message: EngineToHost = {type: "slotActionDone", seq: expectInteger(obj, "seq", what), tokens: expectInteger(obj, "tokens", what),
                bytes: expectInteger(obj, "bytes", what), ms: expectNumber(obj, "ms", what)};
            const error = optionalString(obj, "error", what, 2000);
            if (error === undefined)
                return message;
            return {...message, error, errorCode: obj.errorCode === undefined ? "engine_error" : expectOneOf(obj, "errorCode", requestErrorCodes, what)};
        }
        case "rejected": return {type: "rejected", reason: expectString(obj, "reason", "rejected")};
        case "log": return {type: "log", level: expectOneOf(obj, "level", engineLogLevels, "log"), message: expectString(obj, "message", "log")};
        default: throw new ProtocolError(`unknown message type ${JSON.stringify(String(obj.type)).slice(0, 80)}`);
    }
}
