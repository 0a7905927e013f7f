/**
 * llama.cpp's `/infill` prompt (a code editor's completion at the cursor, llama.vscode's request): other files' code
 * first — after the model's repository token and each behind its file-separator token where the vocabulary has them
 * (Qwen2.5-Coder's `<|repo_name|>` / `<|file_sep|>`, the repo-level FIM pattern), else behind a snippet separator
 * line —, then BOS where the vocabulary asks for it, [FIM_PRE] prefix + the cursor's line [FIM_SUF] suffix
 * [FIM_MID]. As llama-server keeps it within one batch: the prefix's last ¾ of a batch, the suffix's first ¼ (less the
 * cursor's line and two tokens); the other files fill what the context leaves after a batch and twice the tokens
 * reserved for the answer, their end kept.
 */
import type {InfillContext} from "../protocol/engineMessages.js";
import type {LlamaModel, Token} from "./llamaTypes.js";

/** The file separator llama.cpp writes when the vocabulary has no file-separator token. */
const snippetSeparator = "\n\n--- snippet ---\n\n";
/** llama.cpp's names for the repository and file-separator tokens, when the GGUF does not name their ids. */
const repoTokenTexts = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const fileSeparatorTexts = ["<|file_sep|>"];

export type InfillLimits = {batchSize: number, sequenceCapacity: number};
/** The model's fill-in-the-middle prefix, suffix and middle tokens. */
export type FimTokens = {prefix: Token, suffix: Token, middle: Token};

type RepoTokens = {repo: Token | undefined, fileSeparator: Token | undefined};
const repoTokensOf = new WeakMap<LlamaModel, RepoTokens>();

/** `tokenizer.ggml.<key>`, when the GGUF names it. */
function metadataToken(model: LlamaModel, key: string): Token | undefined {
    const ggml = (model.fileInfo.metadata.tokenizer as {ggml?: Record<string, unknown>} | undefined)?.ggml;
    const id = ggml?.[key];
    return typeof id === "number" && Number.isInteger(id) && id >= 0 ? id as Token : undefined;
}

/** The first of `texts` that is one token of the vocabulary (its text parsed as a special token). */
function tokenByText(model: LlamaModel, texts: readonly string[]): Token | undefined {
    for (const text of texts) {
        const tokens = model.tokenize(text, true);
        if (tokens.length === 1 && model.detokenize(tokens, true) === text)
            return tokens[0];
    }
    return undefined;
}

function repoTokens(model: LlamaModel): RepoTokens {
    let tokens = repoTokensOf.get(model);
    if (tokens === undefined) {
        tokens = {repo: metadataToken(model, "fim_rep_token_id") ?? tokenByText(model, repoTokenTexts),
            fileSeparator: metadataToken(model, "fim_sep_token_id") ?? tokenByText(model, fileSeparatorTexts)};
        repoTokensOf.set(model, tokens);
    }
    return tokens;
}

/** The other files' tokens, in the repo-level pattern or behind snippet separators. */
function extraTokens(model: LlamaModel, extra: InfillContext["extra"]): Token[] {
    const {repo, fileSeparator} = repoTokens(model);
    const tokens: Token[] = [];
    if (repo !== undefined)
        tokens.push(repo, ...model.tokenize("myproject\n", false));
    for (const chunk of extra) {
        if (fileSeparator !== undefined)
            tokens.push(fileSeparator, ...model.tokenize(`${chunk.filename}\n`, false));
        else
            tokens.push(...model.tokenize(snippetSeparator, false));
        tokens.push(...model.tokenize(chunk.text, false));
    }
    // The file being edited (its name is not sent).
    if (fileSeparator !== undefined)
        tokens.push(fileSeparator, ...model.tokenize("filename\n", false));
    return tokens;
}

/** The prompt; `fim`: the model's FIM prefix, suffix and middle tokens; `bos`: BOS when the vocabulary asks for it. */
export function infillPrompt(model: LlamaModel, fim: FimTokens, bos: readonly Token[],
                             prefix: string, suffix: string, context: InfillContext, limits: InfillLimits): Token[] {
    const cursorLine = model.tokenize(context.cursorLine, true);
    const prefixTokens = model.tokenize(prefix, false);
    const suffixTokens = model.tokenize(suffix, false);
    const quarter = Math.floor(limits.batchSize / 4);
    const prefixTake = Math.min(prefixTokens.length, 3 * quarter);
    const suffixTake = Math.min(suffixTokens.length, Math.max(0, quarter - (2 + cursorLine.length)));
    const extra = extraTokens(model, context.extra);
    const extraTake = Math.min(extra.length, Math.max(0, limits.sequenceCapacity - limits.batchSize - 2 * context.reserveTokens));
    // The other files before BOS, as llama-server puts them.
    return [
        ...extra.slice(extra.length - extraTake),
        ...bos,
        fim.prefix, ...prefixTokens.slice(prefixTokens.length - prefixTake), ...cursorLine,
        fim.suffix, ...suffixTokens.slice(0, suffixTake),
        fim.middle
    ];
}
