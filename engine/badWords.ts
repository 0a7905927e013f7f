/**
 * vLLM's `bad_words` on node-llama-cpp's per-token bias: each word is tokenized as vLLM tokenizes it — as written (its
 * leading spaces trimmed), and after one space where that gives a different first token in as many tokens — and at
 * each step the tokens that would complete one of those token sequences are banned. A one-token word is banned
 * outright; a longer one's last token only where its other tokens were the last ones generated (the prompt does not
 * count, as in vLLM).
 */
import type {LlamaModel, Token} from "./llamaTypes.js";

export class BadWords {
    /** One-token words: banned at every step. */
    readonly always: readonly Token[];
    /** Longer words: their last token, banned after the others. */
    private readonly sequences: ReadonlyArray<readonly Token[]>;

    constructor(model: LlamaModel, words: readonly string[]) {
        const always = new Set<Token>();
        const sequences: Token[][] = [];
        for (const word of words)
            for (const tokens of tokenizations(model, word))
                if (tokens.length === 1)
                    always.add(tokens[0]!);
                else
                    sequences.push(tokens);
        this.always = [...always];
        this.sequences = sequences;
    }

    /**
     * The tokens that may not follow `generated`: every one-token word, and each longer word's last token where the
     * rest was just generated.
     */
    bannedAfter(generated: readonly Token[]): Token[] {
        const banned = [...this.always];
        for (const sequence of this.sequences) {
            const prefix = sequence.length - 1;
            if (prefix > generated.length)
                continue;
            let matches = true;
            for (let i = 0; i < prefix && matches; i++)
                matches = generated[generated.length - prefix + i] === sequence[i];
            if (matches)
                banned.push(sequence[prefix]!);
        }
        return banned;
    }
}

/** vLLM's tokenizations of a bad word: as written without leading spaces, and after one space when that differs in its first token only. */
function tokenizations(model: LlamaModel, word: string): Token[][] {
    const trimmed = word.trimStart();
    const plain = model.tokenize(trimmed, false);
    const spaced = model.tokenize(` ${trimmed}`, false);
    const result = plain.length > 0 ? [plain] : [];
    if (spaced.length > 0 && spaced.length === plain.length && spaced[0] !== plain[0])
        result.push(spaced);
    return result;
}
