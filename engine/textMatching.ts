/** Finding any of several strings in streamed text (stop strings, the start of a tool call). */

/** Where the first of `needles` to occur in `text` starts; −1 when none does. */
export function earliestIndex(text: string, needles: readonly string[]): number {
    let earliest = -1;
    for (const needle of needles) {
        const at = text.indexOf(needle);
        if (at !== -1 && (earliest === -1 || at < earliest))
            earliest = at;
    }
    return earliest;
}

/** Length of the longest end of `text` that is a proper start of one of `needles` (each at most `longest` long): what to hold back. */
export function partialMatchLength(text: string, needles: readonly string[], longest: number): number {
    for (let length = Math.min(longest - 1, text.length); length > 0; length--) {
        const end = text.slice(text.length - length);
        if (needles.some((needle) => needle.startsWith(end)))
            return length;
    }
    return 0;
}
