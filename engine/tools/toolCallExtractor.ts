/**
 * Separates a tool-calling model's answer into its text and its calls, as the text streams: text that may
 * be the start of a call is held back until the next text decides; from a call's first word on, the text
 * is kept aside — and let go as soon as it cannot be a call (it leaves the call syntax before the
 * arguments, or names a function not offered) — and at the end parsed into calls. Parsing tolerates whitespace that
 * differs from the template's; text that does not parse as a call (a function that is not offered,
 * arguments that are not JSON) goes back into the answer's text, so nothing the model wrote is lost.
 */
import type {GeneratedToolCall} from "../../protocol/engineMessages.js";
import {earliestIndex, partialMatchLength} from "../textMatching.js";
import {withFunctionName, type ToolCallSyntax} from "./toolCallSyntax.js";

/** A syntax part's first word: what the model's output must contain for a call to have begun. */
function firstWord(text: string): string {
    return text.trimStart().split(/\s/)[0] ?? "";
}

export class ToolCallExtractor {
    private readonly triggers: string[];
    private readonly longest: number;
    private held = "";
    private captured: string | undefined;

    constructor(private readonly syntax: ToolCallSyntax, private readonly toolNames: ReadonlySet<string>) {
        const starts = [syntax.sectionPrefix, syntax.prefix, ...syntax.prefixAlternates].map(firstWord).filter((word) => word !== "");
        this.triggers = [...new Set(starts)];
        this.longest = Math.max(0, ...this.triggers.map((trigger) => trigger.length));
    }

    /** Adds text; returns the answer's text that may be output now. */
    push(text: string): string {
        if (this.captured === undefined)
            return this.scan(this.held + text);
        this.captured += text;
        return this.releaseUnlessCall();
    }

    /** Outputs `buffer` up to a call's first word, or all but what may be the start of one. */
    private scan(buffer: string): string {
        this.held = "";
        const at = earliestIndex(buffer, this.triggers);
        if (at !== -1) {
            this.captured = buffer.slice(at);
            return buffer.slice(0, at) + this.releaseUnlessCall();
        }
        const keep = partialMatchLength(buffer, this.triggers, this.longest);
        this.held = buffer.slice(buffer.length - keep);
        return buffer.slice(0, buffer.length - keep);
    }

    /**
     * As soon as the text kept aside can no longer be a call (it leaves the call syntax before the arguments,
     * or names a function not offered), it is output after all, and scanned for a later call.
     */
    private releaseUnlessCall(): string {
        const captured = this.captured!;
        if (callStartViable(captured, this.syntax, this.toolNames))
            return "";
        this.captured = undefined;
        return captured.slice(0, 1) + this.scan(captured.slice(1));
    }

    /** The end of the answer: the text still to output (held back, or a call that did not parse) and the calls. */
    finish(): {text: string, calls: GeneratedToolCall[]} {
        const held = this.held;
        this.held = "";
        if (this.captured === undefined)
            return {text: held, calls: []};
        const parsed = parseToolCalls(this.captured, this.syntax, this.toolNames);
        this.captured = "";
        return parsed;
    }
}

const namePattern = /[A-Za-z0-9_-]/;

/** Reads `text` from `pos` on; every method moves `pos` only when it succeeds. */
class Reader {
    pos = 0;

    constructor(readonly text: string) {}

    skipWhitespace(): void {
        while (this.pos < this.text.length && /\s/.test(this.text[this.pos]!))
            this.pos++;
    }

    /** Matches `literal`, whitespace in either being free (a template's "{\"name\": " matches the model's "{\"name\":"). */
    literal(literal: string): boolean {
        return this.partialLiteral(literal) === "matched";
    }

    /** As `literal`, but "partial" when the text ends before the literal does (it may still follow); moves only when matched. */
    partialLiteral(literal: string): "matched" | "partial" | "mismatch" {
        let at = this.pos;
        for (const char of literal) {
            if (/\s/.test(char))
                continue;
            while (at < this.text.length && /\s/.test(this.text[at]!))
                at++;
            if (at >= this.text.length)
                return "partial";
            if (this.text[at] !== char)
                return "mismatch";
            at++;
        }
        this.pos = at;
        return "matched";
    }

    name(): string {
        this.skipWhitespace();
        const start = this.pos;
        while (this.pos < this.text.length && namePattern.test(this.text[this.pos]!))
            this.pos++;
        return this.text.slice(start, this.pos);
    }

    /** One JSON value's text (an object or array by bracket balance, else a string or a bare literal), if it parses. */
    json(): string | undefined {
        this.skipWhitespace();
        const start = this.pos;
        const first = this.text[start];
        let end = start;
        if (first === "{" || first === "[") {
            let depth = 0;
            let inString = false;
            for (; end < this.text.length; end++) {
                const char = this.text[end];
                if (inString) {
                    if (char === "\\") end++;
                    else if (char === "\"") inString = false;
                } else if (char === "\"") inString = true;
                else if (char === "{" || char === "[") depth++;
                else if (char === "}" || char === "]") {
                    depth--;
                    if (depth === 0) break;
                }
            }
            end++;
        } else if (first === "\"") {
            for (end = start + 1; end < this.text.length && this.text[end] !== "\""; end++)
                if (this.text[end] === "\\") end++;
            end++;
        } else
            while (end < this.text.length && /[^\s,)}\]]/.test(this.text[end]!)) end++;
        const candidate = this.text.slice(start, end);
        try {
            JSON.parse(candidate);
        } catch {
            return undefined;
        }
        this.pos = end;
        return candidate;
    }
}

/**
 * Whether `text` (from a call's first word on) may still be a call: the syntax so far, and a function
 * offered (or the start of one's name).
 */
function callStartViable(text: string, syntax: ToolCallSyntax, toolNames: ReadonlySet<string>): boolean {
    const reader = new Reader(text);
    if (syntax.sectionPrefix !== "") {
        const section = reader.partialLiteral(syntax.sectionPrefix);
        if (section === "partial")
            return true;
    }
    const start = reader.pos;
    const prefixes = [syntax.prefix, ...syntax.prefixAlternates].map((prefix) => {
        reader.pos = start;
        return {result: reader.partialLiteral(prefix), end: reader.pos};
    });
    if (prefixes.some(({result}) => result === "partial"))
        return true;
    const matched = prefixes.find(({result}) => result === "matched");
    if (matched === undefined)
        return false;
    reader.pos = matched.end;
    const name = reader.name();
    if (reader.pos >= text.length)
        return [...toolNames].some((tool) => tool.startsWith(name));
    return toolNames.has(name);
}

/**
 * The calls at the start of `text` (which begins where a call's first word was seen), and the text after
 * the last whole call. A call that does not parse ends the list there; when none parses, all of `text`
 * is the answer's text.
 */
export type ParsedToolCalls = {text: string, calls: GeneratedToolCall[]};

export function parseToolCalls(text: string, syntax: ToolCallSyntax, toolNames: ReadonlySet<string>): ParsedToolCalls {
    const reader = new Reader(text);
    const calls: GeneratedToolCall[] = [];
    if (syntax.sectionPrefix !== "")
        reader.literal(syntax.sectionPrefix);
    for (;;) {
        const callStart = reader.pos;
        if (calls.length > 0 && syntax.betweenCalls !== "")
            reader.literal(syntax.betweenCalls);
        if (![syntax.prefix, ...syntax.prefixAlternates].some((prefix) => reader.literal(prefix))) {
            reader.pos = callStart;
            break;
        }
        const call = readCall(reader, syntax, toolNames);
        if (call === undefined) {
            reader.pos = callStart;
            break;
        }
        calls.push(call);
    }
    if (calls.length === 0)
        return {text, calls};
    if (syntax.sectionSuffix !== "")
        reader.literal(syntax.sectionSuffix);
    const rest = text.slice(reader.pos);
    return {text: rest.trim() === "" ? "" : rest, calls};
}

function readCall(reader: Reader, syntax: ToolCallSyntax, toolNames: ReadonlySet<string>): GeneratedToolCall | undefined {
    const name = reader.name();
    if (!toolNames.has(name) || !reader.literal(withFunctionName(syntax.paramsPrefix, name)))
        return undefined;
    const suffix = withFunctionName(syntax.suffix, name);
    const args = reader.json();
    if (args !== undefined && reader.literal(suffix))
        return {name, arguments: args};
    // A function without parameters may be called with nothing between the parentheses (node-llama-cpp's own syntax).
    if (args === undefined && reader.literal(suffix))
        return {name, arguments: "{}"};
    return undefined;
}
