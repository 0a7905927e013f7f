/**
 * How a model marks its reasoning (a "thought" segment, such as DeepSeek-R1's and Qwen3's `<think>…</think>`), as
 * node-llama-cpp's chat wrapper for it knows: a specialized wrapper's own settings, or for a Jinja template what
 * node-llama-cpp read from it by rendering an assistant message with `reasoning_content` (or found as known
 * markers in it).
 */
export type ReasoningSyntax = {
    /** The text that opens a reasoning segment, trimmed ("<think>"); undefined when only the template opens one. */
    open: string | undefined,
    /** The text that closes it, trimmed ("</think>"). */
    close: string,
    /** The opening text as the template writes it ("<think>\n"); "" when the template's own prompt opens it. */
    opener: string,
    /** The closing text as the template writes it ("\n</think>\n\n"). */
    closer: string,
    /**
     * The template starts every answer inside a reasoning segment (DeepSeek-R1's generation prompt ends with
     * `<think>\n`; node-llama-cpp's `openOnResponseStart`, or a prefix "opened on start").
     */
    opensOnAnswerStart: boolean
};

/** What node-llama-cpp's ChatWrapperSettings["segments"]["thought"] holds (strings or LlamaText values). */
export type WrapperThoughtSettings = {
    prefix: unknown,
    suffix?: unknown,
    openOnResponseStart?: boolean
};

/**
 * `text(value)`: a setting as plain text (node-llama-cpp's `LlamaText(value).toString()`). Undefined when the
 * wrapper has no thought segment, or none whose end can be recognised.
 */
export function reasoningSyntaxOf(thought: WrapperThoughtSettings | undefined,
                                  text: (value: unknown) => string): ReasoningSyntax | undefined {
    if (thought?.suffix === undefined)
        return undefined;
    const closer = text(thought.suffix);
    if (closer.trim() === "")
        return undefined;
    const openedByTemplate = isOpenedOnStart(thought.prefix);
    const opener = openedByTemplate ? "" : text(thought.prefix);
    const open = opener.trim() === "" ? undefined : opener.trim();
    return {open, close: closer.trim(), opener, closer, opensOnAnswerStart: openedByTemplate || thought.openOnResponseStart === true};
}

function isOpenedOnStart(prefix: unknown): boolean {
    return typeof prefix === "object" && prefix !== null && !Array.isArray(prefix) && (prefix as {type?: unknown}).type === "openedOnStart";
}
