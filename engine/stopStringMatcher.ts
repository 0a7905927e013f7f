import {earliestIndex, partialMatchLength} from "./textMatching.js";

/**
 * Finds stop strings in streamed text without ever emitting any part of one: text that could still
 * turn into a stop string (a suffix of what was seen that is a prefix of a stop string) is held back
 * until the next text decides it. Once a stop string appears, the text before it is released and the
 * rest is dropped.
 */
export class StopStringMatcher {
    private held = "";
    private stopped = false;
    /** The stop string that ended the output (the earliest found; the longest of those starting there). */
    matched: string | undefined;
    private readonly longest: number;

    /** `includeStop`: the stop string that ends the output is part of it (vLLM's `include_stop_str_in_output`). */
    constructor(private readonly stops: readonly string[], private readonly includeStop = false) {
        this.longest = Math.max(0, ...stops.map((stop) => stop.length));
    }

    get hasStopped(): boolean {
        return this.stopped;
    }

    /**
     * Adds text; returns what may be output now. After a stop string was found, returns "" forever. `canStop` false: a
     * stop string in this text is output like any other (before vLLM's `min_tokens`, stop strings do not end the output).
     */
    push(text: string, canStop = true): string {
        if (this.stopped)
            return "";
        if (this.stops.length === 0)
            return text;
        const buffer = this.held + text;
        const cut = canStop ? earliestIndex(buffer, this.stops) : -1;
        if (cut !== -1) {
            this.stopped = true;
            const matched = this.stops.filter((stop) => buffer.startsWith(stop, cut)).sort((a, b) => b.length - a.length)[0]!;
            this.matched = matched;
            this.held = "";
            return buffer.slice(0, this.includeStop ? cut + matched.length : cut);
        }
        const keep = partialMatchLength(buffer, this.stops, this.longest);
        this.held = buffer.slice(buffer.length - keep);
        return buffer.slice(0, buffer.length - keep);
    }

    /** The end of the output: whatever was held back was not a stop string after all. */
    flush(): string {
        const rest = this.held;
        this.held = "";
        return this.stopped ? "" : rest;
    }
}
