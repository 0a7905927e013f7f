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

    constructor(private readonly stops: readonly string[]) {
        this.longest = Math.max(0, ...stops.map((stop) => stop.length));
    }

    get hasStopped(): boolean {
        return this.stopped;
    }

    /** Adds text; returns what may be output now. After a stop string was found, returns "" forever. */
    push(text: string): string {
        if (this.stopped)
            return "";
        if (this.stops.length === 0)
            return text;
        const buffer = this.held + text;
        const cut = earliestIndex(buffer, this.stops);
        if (cut !== -1) {
            this.stopped = true;
            this.matched = this.stops.filter((stop) => buffer.startsWith(stop, cut)).sort((a, b) => b.length - a.length)[0];
            this.held = "";
            return buffer.slice(0, cut);
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
