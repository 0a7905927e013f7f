/**
 * llama.cpp's code-completion limits on generated text (its server's `n_indent` and `t_max_predict_ms`): after the
 * first line, a line whose first character other than a space or tab comes at less indentation than `minIndent`
 * ends generation, that character and what follows not output (a blank line too); a token with a newline generated
 * more than `maxGenerationMs` after the first token ends it after that token.
 */
export class LineLimits {
    private atLineStart = false;
    private indent = 0;
    private reached = false;
    /** When the first token was sampled (the time limit counts from it). */
    private firstTokenAt: number | undefined;

    constructor(private readonly minIndent: number, private readonly maxGenerationMs: number) {}

    /** Whether a limit ended generation. */
    get stopped(): boolean {
        return this.reached;
    }

    /** `text` (stable output, in order) as far as the indentation limit lets it through. */
    push(text: string): string {
        if (this.reached)
            return "";
        if (this.minIndent <= 0)
            return text;
        for (let i = 0; i < text.length; i++) {
            const char = text[i];
            if (this.atLineStart) {
                if (char === " " || char === "\t") {
                    this.indent++;
                    continue;
                }
                if (this.indent < this.minIndent) {
                    this.reached = true;
                    return text.slice(0, i);
                }
                this.atLineStart = false;
            }
            if (char === "\n") {
                this.atLineStart = true;
                this.indent = 0;
            }
        }
        return text;
    }

    /** After a token whose text was `tokenText`, sampled at `t` (ms; the first call is the first token's): whether time is up. */
    timeUp(tokenText: string, t: number): boolean {
        this.firstTokenAt ??= t;
        if (this.maxGenerationMs > 0 && t - this.firstTokenAt > this.maxGenerationMs && tokenText.includes("\n"))
            this.reached = true;
        return this.reached;
    }
}
