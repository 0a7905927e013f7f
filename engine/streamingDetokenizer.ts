import type {LlamaModel, Token} from "./llamaTypes.js";

/** How many tokens may be held back waiting for the rest of a split UTF-8 character. */
const maxHeldTokens = 4;
/** Previous tokens handed to detokenize so SentencePiece leading-space rules see the context. */
const contextTokens = 4;

/**
 * Turns a stream of tokens into a stream of text without ever emitting half a UTF-8 character.
 *
 * Detokenizing one byte token gives U+FFFD, so tokens whose text ends in U+FFFD are held back until
 * the character completes (or `maxHeldTokens` pass, for genuinely invalid bytes from random
 * weights, which then go out as U+FFFD). Every token is accounted for exactly once.
 */
export class StreamingDetokenizer {
    private readonly held: Token[] = [];
    private readonly previous: Token[] = [];

    /** `specialTokens`: special tokens' text (`</s>` …) is output; otherwise they read as "". */
    constructor(private readonly model: LlamaModel, private readonly specialTokens = false) {}

    /**
     * Starts the output after `prompt`: its last tokens are the first token's context, so a SentencePiece piece that
     * begins with a space keeps it (detokenized alone, the first piece of a text loses it), as llama.cpp's server and
     * vLLM keep it: a completion of "Once upon a" reads " time", not "time".
     */
    follow(prompt: readonly Token[]): void {
        this.previous.splice(0, this.previous.length, ...prompt.slice(-contextTokens));
    }

    /** Adds one token; returns the text that became stable (possibly ""). */
    push(token: Token): string {
        this.held.push(token);
        const text = this.model.detokenize(this.held, this.specialTokens, this.previous);
        if (text.endsWith("\uFFFD") && this.held.length < maxHeldTokens)
            return "";
        return this.release(text);
    }

    /** Releases whatever is held (end of the request). */
    flush(): string {
        if (this.held.length === 0)
            return "";
        return this.release(this.model.detokenize(this.held, this.specialTokens, this.previous));
    }

    private release(text: string): string {
        this.previous.push(...this.held);
        if (this.previous.length > contextTokens)
            this.previous.splice(0, this.previous.length - contextTokens);
        this.held.length = 0;
        return text;
    }
}
