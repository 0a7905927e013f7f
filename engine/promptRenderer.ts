import {importNodeLlamaCpp, type LlamaModel, type NodeLlamaCpp, type Token} from "./llamaTypes.js";
import type {ChatMessage, GenerateRequest, ToolDefinition} from "../protocol/engineMessages.js";
import {ChatHistoryError, chatHistoryOf} from "./chatHistory.js";
import {toolCallSyntaxOf, type ToolCallSyntax} from "./tools/toolCallSyntax.js";
import {reasoningSyntaxOf, type ReasoningSyntax, type WrapperThoughtSettings} from "./reasoning/reasoningSyntax.js";
import {infillPrompt, type FimTokens, type InfillLimits} from "./infillPrompt.js";

/** The model's GGUF chat template (`tokenizer.chat_template`), when it has one. */
export function chatTemplateOf(model: LlamaModel): string | undefined {
    const template = (model.fileInfo.metadata.tokenizer as {chat_template?: unknown} | undefined)?.chat_template;
    return typeof template === "string" ? template : undefined;
}

/** Whether the model's GGUF carries a chat template; models without one get plain role-prefixed text (and cannot be offered tools). */
export function hasChatTemplate(model: LlamaModel): boolean {
    return chatTemplateOf(model) !== undefined;
}

/** `continueFinal`: the last (assistant) message stays open, its answer continues it. */
function plainChatText(messages: ChatMessage[], continueFinal: boolean): string {
    const lines = messages.map((message) => `${message.role}: ${message.content}`).join("\n");
    return continueFinal ? lines : `${lines}\nassistant:`;
}

/** The tools a request offers the model: none under the plain fallback (no template to render them). */
export function offeredTools(model: LlamaModel, request: Pick<GenerateRequest, "tools">): ToolDefinition[] | undefined {
    return request.tools !== undefined && request.tools.length > 0 && hasChatTemplate(model) ? request.tools : undefined;
}

/** The request asks for something this model cannot do (the caller's mistake, not the engine's). */
export class PromptInputError extends Error {
    override readonly name = "PromptInputError";
}

/**
 * Input processing: turns a request's prompt or chat messages into prompt tokens. Chat messages go
 * through node-llama-cpp's chat wrapper for the model (its Jinja template when the GGUF has one).
 * A prompt with a suffix becomes a fill-in-the-middle prompt: [BOS] FIM_PRE prompt FIM_SUF suffix FIM_MID.
 * Offered tools are rendered as the template renders them (or, when it has no place for them, as
 * node-llama-cpp documents functions in the system prompt).
 */
export function renderPrompt(model: LlamaModel,
                             request: Pick<GenerateRequest, "prompt" | "promptTokens" | "messages" | "suffix" | "infill" | "tools" |
                                 "continueFinalMessage">,
                             answerStart?: AnswerStart, limits?: InfillLimits): Token[] {
    if (request.promptTokens !== undefined)
        return [...request.promptTokens] as Token[];
    if (request.prompt !== undefined && request.suffix !== undefined) {
        const fim = fimTokens(model);
        if (request.infill !== undefined && limits !== undefined)
            return infillPrompt(model, fim, beginning(model), request.prompt, request.suffix, request.infill, limits);
        return fillInTheMiddle(model, fim, request.prompt, request.suffix);
    }
    if (request.prompt !== undefined)
        return textPrompt(model, request.prompt);
    return renderChat(model, request, answerStart).tokens;
}

/** Continuing the final assistant message: it stays open (node-llama-cpp renders a history's last model response so). */
function continuesFinalMessage(request: Pick<GenerateRequest, "messages" | "continueFinalMessage">): boolean {
    return request.continueFinalMessage === true && request.messages?.at(-1)?.role === "assistant";
}

/**
 * A chat request's prompt: its tokens (what `renderPrompt` gives) and its text as the template writes it (special tokens
 * as their text; llama.cpp's server's `/apply-template`), without the BOS the vocabulary adds by itself.
 */
export function renderChat(model: LlamaModel, request: Pick<GenerateRequest, "messages" | "tools" | "continueFinalMessage">,
                           answerStart?: AnswerStart): {tokens: Token[], text: string} {
    const messages = request.messages ?? [];
    const continues = continuesFinalMessage(request);
    if (!hasChatTemplate(model)) {
        const text = plainChatText(messages, continues);
        return {tokens: textPrompt(model, text), text};
    }
    const rendered = chatPromptText(model, messages, offeredTools(model, request), continues ? undefined : answerStart, continues);
    const text = textOf(model, rendered);
    const tokens = chatPromptTokens(model, rendered, text);
    // A template that does not write BOS itself still gets it where the vocabulary asks for it, as llama.cpp's server
    // does (an SPM model fine-tuned on ChatML, such as OpenHermes-Mistral): node-llama-cpp adds it only when the template does.
    const bos = beginning(model);
    return {tokens: bos.length > 0 && tokens[0] !== bos[0] ? [...bos, ...tokens] : tokens, text};
}

type LlamaTextValue = ReturnType<NodeLlamaCpp["LlamaText"]>;

/** A rendered chat prompt as one string: its special tokens (BOS …) written as their text. */
function textOf(model: LlamaModel, text: LlamaTextValue): string {
    const {SpecialToken} = chatWrapperModule!;
    return text.values.map((value) =>
        value instanceof SpecialToken ? model.detokenize(value.tokenize(model.tokenizer), true) : value.toString()).join("");
}

/**
 * A chat prompt's tokens as llama.cpp's server and vLLM get them: its `text` tokenized whole, special tokens'
 * text read as those tokens. node-llama-cpp tokenizes it piece by piece (template, message, template …), and a
 * SentencePiece vocabulary then starts each piece after a template part with its word-start space (one `▁` token more
 * per message where the template's markup is text, as in Llama 2's `[INST]` or ChatML on a vocabulary without those
 * tokens) and merges nothing across pieces. A message whose text holds a control token's text (a file that quotes
 * `<|im_end|>`) would have it read as that token: such a prompt keeps node-llama-cpp's tokenization, its messages text.
 */
function chatPromptTokens(model: LlamaModel, rendered: LlamaTextValue, text: string): Token[] {
    const control = controlTokenTexts(model);
    const {SpecialToken, SpecialTokensText} = chatWrapperModule!;
    for (const value of rendered.values)
        if (!(value instanceof SpecialToken) && !(value instanceof SpecialTokensText) && control !== undefined && control.test(value))
            return rendered.tokenize(model.tokenizer);
    return model.tokenize(text, true);
}

const controlTokenPatterns = new WeakMap<LlamaModel, RegExp | null>();

/**
 * A pattern matching the text of any of the vocabulary's control (or unknown) tokens — those that special-token parsing
 * reads out of text; user-defined tokens llama.cpp reads either way. Built once per model (chatWrapperFor's preload).
 */
function controlTokenTexts(model: LlamaModel): RegExp | undefined {
    let pattern = controlTokenPatterns.get(model);
    if (pattern === undefined) {
        const texts = new Set<string>();
        for (const token of model.iterateAllTokens()) {
            const attributes = model.getTokenAttributes(token);
            if (attributes.control || attributes.unknown) {
                const text = model.detokenize([token], true);
                if (text !== "")
                    texts.add(text);
            }
        }
        pattern = texts.size === 0 ? null : new RegExp([...texts].map((text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"));
        controlTokenPatterns.set(model, pattern);
    }
    return pattern ?? undefined;
}

/**
 * How the prompt ends for a template with a reasoning segment: "open" = inside the segment, for a template whose
 * answers start there (ReasoningSyntax.opensOnAnswerStart), as node-llama-cpp's own chat does (a Jinja template's
 * generation prompt `<think>\n` is not part of node-llama-cpp's rendering); "closed" = after an empty segment, so the
 * answer starts at once (as Qwen3's template does without thinking).
 */
export type AnswerStart = "open" | "closed";

/** BOS, for a vocabulary whose texts begin with it (llama.cpp's `add_bos_token`); else nothing. */
function beginning(model: LlamaModel): Token[] {
    return model.tokens.shouldPrependBosToken && model.tokens.bos !== null ? [model.tokens.bos] : [];
}

/**
 * A text prompt as llama.cpp's server and vLLM tokenize a completion's: BOS where the vocabulary asks for it, and
 * special tokens' text read as those tokens (a prompt written in the model's own chat or FIM markup works).
 */
function textPrompt(model: LlamaModel, text: string): Token[] {
    return [...beginning(model), ...model.tokenize(text, true)];
}

/** The model's FIM prefix, suffix and middle tokens; a model without them cannot fill in the middle. */
function fimTokens(model: LlamaModel): FimTokens {
    const {prefix, suffix, middle} = model.tokens.infill;
    if (prefix === null || suffix === null || middle === null)
        throw new PromptInputError("this model has no fill-in-the-middle tokens (FIM prefix, suffix and middle), so `suffix` cannot be used");
    return {prefix, suffix, middle};
}

function fillInTheMiddle(model: LlamaModel, fim: FimTokens, prefix: string, suffix: string): Token[] {
    // CodeLlama's `<s><PRE> …`: BOS first where the vocabulary asks for it, as llama.cpp's server does.
    return [...beginning(model), fim.prefix, ...model.tokenize(prefix, false), fim.suffix, ...model.tokenize(suffix, false), fim.middle];
}

let chatWrapperModule: NodeLlamaCpp | undefined;

type ChatWrapper = NonNullable<ReturnType<NodeLlamaCpp["resolveChatWrapper"]>>;

/**
 * node-llama-cpp's chat wrapper of each model, resolved once: resolving compares the model's Jinja
 * template with every specialized wrapper by rendering sample chats (250–500 ms on the 2-vCPU VM for the
 * demo model's template), and it ran on the engine's main thread for every chat request, stalling every
 * running request's next token that long; rendering with the resolved wrapper takes < 3 ms for 7000 tokens.
 */
const chatWrappers = new WeakMap<LlamaModel, ChatWrapper>();

/**
 * Loads node-llama-cpp (ESM-only) so rendering stays synchronous, and with `model` resolves its chat
 * wrapper now, while the model loads, instead of at its first chat request.
 */
export async function preloadChatWrapper(model?: LlamaModel): Promise<void> {
    chatWrapperModule ??= await importNodeLlamaCpp();
    if (model !== undefined && hasChatTemplate(model)) {
        chatWrapperFor(model);
        controlTokenTexts(model);
    }
}

/** The model's chat wrapper, the same object every time (see `chatWrappers`). */
export function chatWrapperFor(model: LlamaModel): ChatWrapper {
    if (chatWrapperModule === undefined)
        throw new Error("chat wrapper not loaded");
    let wrapper = chatWrappers.get(model);
    if (wrapper === undefined) {
        wrapper = chatWrapperModule.resolveChatWrapper(model);
        chatWrappers.set(model, wrapper);
    }
    return wrapper;
}

const toolCallSyntaxes = new WeakMap<LlamaModel, ToolCallSyntax>();

/** How the model writes a tool call (see ToolCallSyntax); for a model with a chat template. Read once per model, as its wrapper. */
export function toolCallSyntaxFor(model: LlamaModel): ToolCallSyntax {
    let syntax = toolCallSyntaxes.get(model);
    if (syntax === undefined) {
        const {LlamaText} = chatWrapperModule!;
        const text = (value: unknown): string => LlamaText(value as Parameters<typeof LlamaText>[0]).toString();
        syntax = toolCallSyntaxOf(chatWrapperFor(model).settings.functions, text);
        toolCallSyntaxes.set(model, syntax);
    }
    return syntax;
}

const reasoningSyntaxes = new WeakMap<LlamaModel, ReasoningSyntax | null>();
/** How the model marks its reasoning (see ReasoningSyntax), undefined when its template has no reasoning segment. Read once per model. */
export function reasoningSyntaxFor(model: LlamaModel): ReasoningSyntax | undefined {
    if (!hasChatTemplate(model))
        return undefined;
    let syntax = reasoningSyntaxes.get(model);
    if (syntax === undefined) {
        const {LlamaText} = chatWrapperModule!;
        const text = (value: unknown): string => LlamaText(value as Parameters<typeof LlamaText>[0]).toString();
        const thought = chatWrapperFor(model).settings.segments?.thought as WrapperThoughtSettings | undefined;
        syntax = reasoningSyntaxOf(thought, text) ?? null;
        reasoningSyntaxes.set(model, syntax);
    }
    return syntax ?? undefined;
}

/** node-llama-cpp's function definitions; a tool's parameters are passed on as the JSON schema the client sent. */
type ChatFunctions = Parameters<ChatWrapper["generateContextState"]>[0]["availableFunctions"];

/** The chat prompt as node-llama-cpp's chat wrapper renders it (with the reasoning segment opened or closed as asked). */
function chatPromptText(model: LlamaModel, messages: ChatMessage[], tools: ToolDefinition[] | undefined,
                        answerStart: AnswerStart | undefined, continueFinal: boolean): LlamaTextValue {
    const wrapper = chatWrapperFor(model);
    let chatHistory;
    try {
        chatHistory = chatHistoryOf(messages);
    } catch (error) {
        throw error instanceof ChatHistoryError ? new PromptInputError(error.message) : error;
    }
    if (!continueFinal)
        chatHistory.push({type: "model", response: []});
    const availableFunctions = tools === undefined ? undefined
        : Object.fromEntries(tools.map((tool) => [tool.name, {
            ...tool.description !== undefined ? {description: tool.description} : {},
            ...tool.parameters !== undefined ? {params: tool.parameters} : {}
        }]));
    let contextText;
    try {
        contextText = wrapper.generateContextState({
            chatHistory, availableFunctions: availableFunctions as ChatFunctions, documentFunctionParams: true
        }).contextText;
    } catch (error) {
        // node-llama-cpp documents a function's parameters from its schema; a schema it cannot read fails here.
        if (tools === undefined)
            throw error;
        throw new PromptInputError(`could not render the tools into the prompt: ${error instanceof Error ? error.message : String(error)}`);
    }
    const reasoning = answerStart === undefined ? undefined : reasoningSyntaxFor(model);
    if (reasoning === undefined || (answerStart === "open" && !reasoning.opensOnAnswerStart))
        return contextText;
    const {LlamaText, SpecialTokensText} = chatWrapperModule!;
    // Opened already when the wrapper renders the template's generation prompt itself.
    const opened = reasoning.open === undefined || contextText.toString().trimEnd().endsWith(reasoning.open);
    const ending = (opened ? "" : reasoning.opener) + (answerStart === "closed" ? reasoning.closer : "");
    return LlamaText([contextText, new SpecialTokensText(ending)]);
}
