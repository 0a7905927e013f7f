/**
 * `POST /tokenize` and `POST /detokenize` as llama.cpp's server and vLLM serve them (the same paths, two body
 * shapes): llama.cpp's `{"content", "parse_special", "with_pieces"}` (the text alone) and vLLM's `{"prompt",
 * "add_special_tokens", "return_token_strs"}` (special tokens always parsed; `add_special_tokens`, default true, adds
 * BOS as a completion's text prompt gets it) or `{"messages"}` (the prompt a chat request would evaluate, with its
 * `tools` and `continue_final_message`); `{"tokens"}`
 * back to text. Answers carry both servers' fields, so either's clients read them. And vLLM's `GET /tokenizer_info`,
 * which clients that tokenize for the server read (lm-evaluation-harness's remote tokenizer).
 */
import {maxCountTokensText, type ChatPromptInput} from "./engineMessages.js";
import {parseChatCompletionRequest} from "./openaiApi.js";
import {ApiRequestError, fail, optionalBooleanField} from "./openaiFields.js";
import {isObject} from "./validation.js";

/** `withPieces`: llama.cpp's `with_pieces` (tokens as `{id, piece}`); `withTokenStrs`: vLLM's `return_token_strs`. */
export type TokenizeRequest = {
    input: {text: string, specialTokens: boolean, asPrompt: boolean} | ChatPromptInput,
    withPieces: boolean, withTokenStrs: boolean
};

export type TokenizeAnswer = {
    /** llama.cpp's: ids, or `{id, piece}` with `with_pieces`. */
    tokens: number[] | Array<{id: number, piece: string}>,
    /** vLLM's. */
    count: number, max_model_len: number, token_strs?: string[]
};
export type DetokenizeAnswer = {content: string, prompt: string};

/**
 * vLLM's `/tokenizer_info` (the tokenizer's Hugging Face settings): the fields its clients read. `add_bos_token`: a text
 * prompt begins with BOS; `chat_template`: the GGUF's, when it has one.
 */
export type TokenizerInfoAnswer = {
    bos_token: string | null, eos_token: string | null, pad_token: null, add_bos_token: boolean, model_max_length: number,
    chat_template?: string
};

export function parseTokenizeRequest(value: unknown): TokenizeRequest {
    if (!isObject(value))
        throw new ApiRequestError("the request body must be a JSON object", null);
    if (value.messages !== undefined) {
        const {messages, tools, continueFinalMessage} = parseChatCompletionRequest({messages: value.messages, tools: value.tools,
            continue_final_message: value.continue_final_message});
        const input = {messages, ...tools !== undefined ? {tools} : {},
            ...continueFinalMessage !== undefined ? {continueFinalMessage} : {}};
        return {input, withPieces: false, withTokenStrs: optionalBooleanField(value, "return_token_strs") ?? false};
    }
    const key = typeof value.content === "string" ? "content" : "prompt";
    const text = value[key];
    if (typeof text !== "string" || text.length > maxCountTokensText)
        fail("content", `expected the text to tokenize in content (or prompt), at most ${maxCountTokensText} characters`);
    const input = key === "content"
        ? {text, specialTokens: optionalBooleanField(value, "parse_special") ?? true, asPrompt: false}
        : {text, specialTokens: true, asPrompt: optionalBooleanField(value, "add_special_tokens") ?? true};
    return {input, withPieces: key === "content" && (optionalBooleanField(value, "with_pieces") ?? false),
        withTokenStrs: key === "prompt" && (optionalBooleanField(value, "return_token_strs") ?? false)};
}

export function parseDetokenizeRequest(value: unknown): number[] {
    if (!isObject(value) || !Array.isArray(value.tokens) || value.tokens.length > maxCountTokensText)
        fail("tokens", "expected an array of token ids");
    return value.tokens.map((token, index) => {
        if (typeof token !== "number" || !Number.isSafeInteger(token) || token < 0)
            fail(`tokens[${index}]`, "expected a token id (a non-negative integer)");
        return token;
    });
}
