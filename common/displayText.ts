/**
 * Text from files and servers (a GGUF's `general.name`, a server's model id) made safe to show: no
 * control characters (an ESC sequence or a CR/LF in a model name must not recolour a terminal or forge
 * a log line), and at most `maxLength` characters (a 5,000-character name must not blank a panel).
 */

/** The most characters a model name keeps; longer ones end in "…". */
export const maxModelNameLength = 200;

// C0 and C1 controls, DEL, and the Unicode line/paragraph separators: matching them is the point.
// eslint-disable-next-line no-control-regex
const controls = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

export function displayText(text: string, maxLength: number): string {
    const clean = text.replace(controls, " ").replace(/ {2,}/g, " ").trim();
    return clean.length <= maxLength ? clean : `${clean.slice(0, maxLength - 1)}…`;
}
