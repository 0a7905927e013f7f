/**
 * Reads a generation response as it streams through the proxy, without holding it back: OpenAI's SSE
 * (`data: {chunk}` … `data: [DONE]`; the Responses API's, Anthropic's and llama.cpp's `/completion` events too), Ollama's NDJSON stream
 * (one object per line, the last `done: true` with its counts), or a whole JSON body. It reports text as it arrives and, at the end, what
 * the server said about the request: finish reason and token counts.
 */
import {createParser, type EventSourceMessage} from "eventsource-parser";
import {parseStreamChunk} from "../../../protocol/openaiApi.js";
import {responseObjectContent, responsesEventContent} from "../../../protocol/openaiResponseObjects.js";
import {anthropicTraffic, type AnthropicTraffic} from "../../../protocol/anthropicMessageObjects.js";
import {isObject} from "../../../protocol/validation.js";
import {embeddingsUsage} from "../../../protocol/embeddingsApi.js";
import {llamaCppAnswerContent} from "../../../protocol/llamaCppApi.js";
import {llamaTimingsCounts} from "../../../protocol/llamaCppMeasures.js";

export type TapEnd = {
    /** The server's finish reason, as it wrote it (`stop`, `length`, …). */
    finishReason: string | undefined,
    promptTokens: number | undefined,
    completionTokens: number | undefined,
    /** An error the server reported inside a 200 stream. */
    error: string | undefined
};

export interface ResponseTap {
    /** Bytes as they pass; `onText` is called for each piece of generated text in them. */
    write(chunk: Buffer): void,
    /** The response ended; what the server said about it. */
    end(): TapEnd
}

export type TapFormat = "sse" | "ndjson" | "json";

/** Which reader fits a response, from its Content-Type. */
export function tapFormat(contentType: string | undefined): TapFormat {
    const type = (contentType ?? "").toLowerCase();
    if (type.includes("text/event-stream"))
        return "sse";
    if (type.includes("ndjson"))
        return "ndjson";
    return "json";
}

const maxJsonBytes = 8 << 20;

export function createTap(format: TapFormat, onText: (text: string) => void): ResponseTap {
    switch (format) {
        case "sse": return new SseTap(onText);
        case "ndjson": return new NdjsonTap(onText);
        case "json": return new JsonTap(onText);
    }
}

/** OpenAI's chat/completions stream, or the Responses API's events. */
class SseTap implements ResponseTap {
    private readonly decoder = new TextDecoder();
    private readonly state: TapEnd = {finishReason: undefined, promptTokens: undefined, completionTokens: undefined, error: undefined};
    private readonly parser = createParser({onEvent: (event) => this.event(event)});
    /** Whether the counts so far are `usage`'s, which `timings` never overrides. */
    private countsFromUsage = false;

    constructor(private readonly onText: (text: string) => void) {}

    write(chunk: Buffer): void {
        this.parser.feed(this.decoder.decode(chunk, {stream: true}));
    }

    end(): TapEnd {
        this.parser.feed(this.decoder.decode());
        return this.state;
    }

    private event(event: EventSourceMessage): void {
        if (event.data === "[DONE]")
            return;
        let chunk;
        let value: unknown;
        try {
            value = JSON.parse(event.data);
            const anthropic = anthropicTraffic(value);
            if (anthropic !== undefined)
                return this.anthropic(anthropic);
            chunk = llamaCppAnswerContent(value) ?? responsesEventContent(value) ?? parseStreamChunk(value);
        } catch {
            return; // not ours to judge: the client gets the bytes as they are
        }
        if (chunk.error !== undefined)
            this.state.error = chunk.error;
        if (chunk.text !== "")
            this.onText(chunk.text);
        if (chunk.finishReason !== null)
            this.state.finishReason = chunk.finishReason;
        if (chunk.usage !== undefined) {
            this.state.promptTokens = chunk.usage.prompt_tokens;
            this.state.completionTokens = chunk.usage.completion_tokens;
            this.countsFromUsage = true;
        } else if (!this.countsFromUsage) {
            // A stream without `usage` (the client did not ask) from llama.cpp's server or ours still has the server's
            // counts in `timings`: better than counting chunks, which may carry several tokens each.
            const counts = llamaTimingsCounts(value);
            if (counts !== undefined) {
                this.state.promptTokens = counts.promptTokens;
                this.state.completionTokens = counts.completionTokens;
            }
        }
    }

    private anthropic(traffic: AnthropicTraffic): void {
        if (traffic.text !== "")
            this.onText(traffic.text);
        applyAnthropic(this.state, traffic);
    }
}

/** An Anthropic answer's counts come in two events (input at the start, output at the end): each sets what it gives. */
function applyAnthropic(state: TapEnd, traffic: AnthropicTraffic): void {
    if (traffic.error !== undefined)
        state.error = traffic.error;
    if (traffic.finishReason !== undefined)
        state.finishReason = traffic.finishReason;
    if (traffic.promptTokens !== undefined)
        state.promptTokens = traffic.promptTokens;
    if (traffic.completionTokens !== undefined)
        state.completionTokens = traffic.completionTokens;
}

/** Ollama's `/api/generate` and `/api/chat` stream: `{"response"|"message": …, "done": false}` lines, then the totals. */
class NdjsonTap implements ResponseTap {
    private readonly decoder = new TextDecoder();
    private buffer = "";
    private readonly state: TapEnd = {finishReason: undefined, promptTokens: undefined, completionTokens: undefined, error: undefined};

    constructor(private readonly onText: (text: string) => void) {}

    write(chunk: Buffer): void {
        this.buffer += this.decoder.decode(chunk, {stream: true});
        let newline: number;
        while ((newline = this.buffer.indexOf("\n")) >= 0) {
            this.line(this.buffer.slice(0, newline));
            this.buffer = this.buffer.slice(newline + 1);
        }
        if (this.buffer.length > maxJsonBytes)
            this.buffer = ""; // a line this long is not Ollama's stream
    }

    end(): TapEnd {
        this.buffer += this.decoder.decode();
        if (this.buffer.trim() !== "")
            this.line(this.buffer);
        return this.state;
    }

    private line(text: string): void {
        let value: unknown;
        try {
            value = JSON.parse(text);
        } catch {
            return;
        }
        readOllamaObject(value, this.state, this.onText);
    }
}

/** A non-streamed answer: OpenAI's completion object or Ollama's final object, read at the end. */
class JsonTap implements ResponseTap {
    private readonly chunks: Buffer[] = [];
    private bytes = 0;

    constructor(private readonly onText: (text: string) => void) {}

    write(chunk: Buffer): void {
        this.bytes += chunk.length;
        if (this.bytes <= maxJsonBytes)
            this.chunks.push(chunk);
    }

    end(): TapEnd {
        const state: TapEnd = {finishReason: undefined, promptTokens: undefined, completionTokens: undefined, error: undefined};
        if (this.bytes > maxJsonBytes)
            return state;
        let value: unknown;
        try {
            value = JSON.parse(Buffer.concat(this.chunks).toString("utf8"));
        } catch {
            return state;
        }
        const embedded = embeddingsUsage(value);
        if (embedded !== undefined) {
            state.finishReason = "stop";
            state.promptTokens = embedded.promptTokens;
            state.completionTokens = 0;
            return state;
        }
        const anthropic = isObject(value) && value.type === "message" ? anthropicTraffic(value) : undefined;
        if (anthropic !== undefined) {
            if (anthropic.text !== "")
                this.onText(anthropic.text);
            applyAnthropic(state, anthropic);
            return state;
        }
        const response = llamaCppAnswerContent(value) ?? responseObjectContent(value, true);
        if (response !== undefined) {
            if (response.text !== "")
                this.onText(response.text);
            state.finishReason = response.finishReason ?? undefined;
            state.error = response.error;
            state.promptTokens = response.usage?.prompt_tokens;
            state.completionTokens = response.usage?.completion_tokens;
            return state;
        }
        if (isObject(value) && ("done" in value || "response" in value || "message" in value) && !("choices" in value)) {
            readOllamaObject(value, state, this.onText);
            return state;
        }
        try {
            // The same fields as a stream chunk, with `message.content` in place of `delta.content`.
            const choices = isObject(value) && Array.isArray(value.choices) ? value.choices as unknown[] : [];
            const first = choices[0];
            const asChunk = isObject(first) && isObject(first.message)
                ? {...value as object, choices: [{...first, delta: first.message}]}
                : value;
            const chunk = parseStreamChunk(asChunk);
            if (chunk.text !== "")
                this.onText(chunk.text);
            state.finishReason = chunk.finishReason ?? undefined;
            state.error = chunk.error;
            state.promptTokens = chunk.usage?.prompt_tokens;
            state.completionTokens = chunk.usage?.completion_tokens;
        } catch {
            // not an OpenAI body: nothing more to learn
        }
        return state;
    }
}

function readOllamaObject(value: unknown, state: TapEnd, onText: (text: string) => void): void {
    if (!isObject(value))
        return;
    if (typeof value.error === "string")
        state.error = value.error;
    const text = typeof value.response === "string" ? value.response
        : isObject(value.message) && typeof value.message.content === "string" ? value.message.content : "";
    if (text !== "")
        onText(text);
    if (value.done === true) {
        state.finishReason = typeof value.done_reason === "string" ? value.done_reason : "stop";
        if (typeof value.prompt_eval_count === "number")
            state.promptTokens = value.prompt_eval_count;
        if (typeof value.eval_count === "number")
            state.completionTokens = value.eval_count;
    }
}
