import {partialMatchLength} from "../textMatching.js";
import type {ReasoningSyntax} from "./reasoningSyntax.js";

/** A piece of streamed output, split: the reasoning's text and the answer's. */
export type SplitText = {reasoning: string, answer: string};

type State =
    /** Nothing seen yet but whitespace, or the start of the opening marker. */
    | "start"
    | "reasoning"
    /** The closing marker was seen; whitespace before the answer is dropped. */
    | "closed"
    | "answer";

/**
 * Separates a model's reasoning from its answer in streamed text, as llama.cpp's server and vLLM's reasoning
 * parsers do: a reasoning segment opened by the prompt (`startsOpen`) or by the opening marker at the start of the
 * output (after whitespace) runs to the closing marker; the markers and the whitespace around the reasoning are
 * in neither part. Text that might still be a marker is held back until it is known (a few characters); text is
 * otherwise passed on as soon as it arrives. Output that never closes its reasoning is all reasoning.
 */
export class ReasoningSplitter {
    private state: State;
    /** Text received but not yet given out (a possible marker, whitespace that may turn out to be trailing). */
    private held = "";
    /** The reasoning has given out text (whitespace before its first text is dropped). */
    private reasoningBegun = false;

    constructor(private readonly syntax: ReasoningSyntax, startsOpen: boolean) {
        this.state = startsOpen ? "reasoning" : syntax.open === undefined ? "answer" : "start";
    }

    /** Whether the output is in its reasoning now (text pushed now would be reasoning). */
    get inReasoning(): boolean {
        return this.state === "reasoning";
    }

    push(text: string): SplitText {
        const out: SplitText = {reasoning: "", answer: ""};
        this.held += text;
        // Each pass either gives text out or changes state; it ends when the held text must wait for more.
        while (this.held !== "" && this.step(out))
            continue;
        return out;
    }

    /** The end of the output: whatever was held goes out where it was. */
    finish(): SplitText {
        const held = this.held;
        this.held = "";
        if (this.state === "start")
            return {reasoning: "", answer: held};
        if (this.state === "reasoning")
            return {reasoning: held.trimEnd(), answer: ""};
        return {reasoning: "", answer: this.state === "answer" ? held : ""};
    }

    /** One step over the held text; false when it has to wait for more. */
    private step(out: SplitText): boolean {
        switch (this.state) {
            case "start": {
                const open = this.syntax.open!;
                const text = this.held.trimStart();
                if (text.startsWith(open)) {
                    this.held = text.slice(open.length);
                    this.state = "reasoning";
                    return true;
                }
                if (open.startsWith(text))
                    return false;
                this.state = "answer";
                return true;
            }
            case "reasoning": {
                if (!this.reasoningBegun) {
                    this.held = this.held.trimStart();
                    if (this.held === "")
                        return false;
                    this.reasoningBegun = true;
                }
                const {close} = this.syntax;
                const at = this.held.indexOf(close);
                if (at !== -1) {
                    out.reasoning += this.held.slice(0, at).trimEnd();
                    this.held = this.held.slice(at + close.length);
                    this.state = "closed";
                    return true;
                }
                // Hold a possible start of the closing marker, and the whitespace before it (trailing, if it closes).
                const keep = partialMatchLength(this.held, [close], close.length);
                const given = this.held.slice(0, this.held.length - keep).trimEnd();
                out.reasoning += given;
                this.held = this.held.slice(given.length);
                return false;
            }
            case "closed": {
                this.held = this.held.trimStart();
                if (this.held === "")
                    return false;
                this.state = "answer";
                return true;
            }
            case "answer":
                out.answer += this.held;
                this.held = "";
                return false;
        }
    }
}
