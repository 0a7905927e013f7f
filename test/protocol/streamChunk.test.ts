/**
 * What a client reading a stream counts as output (protocol/openaiApi.ts parseStreamChunk), and so what
 * the benchmark times and the monitoring proxy records: content, a thinking model's reasoning and tool
 * calls are all generated tokens. Before, only `content` counted, so through the proxy a reasoning model's
 * TTFT came after all its thinking, and a tool-calling answer had no tokens at all.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import {createTap} from "../../extension/host/proxy/responseTap.js";
import {parseStreamChunk} from "../../protocol/openaiApi.js";

const chat = (delta: object, finish: string | null = null): object =>
    ({id: "x", object: "chat.completion.chunk", choices: [{index: 0, delta, finish_reason: finish}]});

test("content, reasoning (llama.cpp's reasoning_content, vLLM's reasoning) and tool-call deltas are output; a role-only chunk is not", () => {
    assert.equal(parseStreamChunk(chat({content: "Hi"})).text, "Hi");
    assert.equal(parseStreamChunk(chat({reasoning_content: "Let me think"})).text, "Let me think");
    assert.equal(parseStreamChunk(chat({reasoning: "Hmm"})).text, "Hmm");
    assert.equal(parseStreamChunk(chat({role: "assistant", content: ""})).text, "");
    // vLLM streams a call's name first, then its arguments in pieces; ours sends the whole call in one chunk.
    assert.equal(parseStreamChunk(chat({tool_calls: [{index: 0, id: "c", type: "function", function: {name: "get_weather", arguments: ""}}]})).text,
        "get_weather");
    assert.equal(parseStreamChunk(chat({tool_calls: [{index: 0, function: {arguments: "{\"city\": "}}]})).text, "{\"city\": ");
    assert.deepEqual(parseStreamChunk(chat({}, "tool_calls")), {text: "", finishReason: "tool_calls"});
    assert.equal(parseStreamChunk({choices: [{index: 0, text: "Once", finish_reason: null}]}).text, "Once");
});

test("the proxy's tap: each reasoning, content and tool-call chunk is a delivery; a whole answer's tool call is its text", () => {
    const deliveries: string[] = [];
    const tap = createTap("sse", (text) => deliveries.push(text));
    const events = [chat({role: "assistant", content: ""}), chat({reasoning_content: "think"}), chat({reasoning_content: "ing"}),
        chat({content: "Let me check."}), chat({tool_calls: [{index: 0, id: "c", type: "function", function: {name: "now", arguments: "{}"}}]}),
        chat({}, "tool_calls")];
    tap.write(Buffer.from(events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("") + "data: [DONE]\n\n"));
    assert.equal(tap.end().finishReason, "tool_calls");
    assert.deepEqual(deliveries, ["think", "ing", "Let me check.", "now{}"]);

    const whole: string[] = [];
    const jsonTap = createTap("json", (text) => whole.push(text));
    jsonTap.write(Buffer.from(JSON.stringify({id: "x", object: "chat.completion", choices: [{index: 0, finish_reason: "tool_calls",
        message: {role: "assistant", content: null, tool_calls: [{id: "c", type: "function", function: {name: "now", arguments: "{}"}}]}}],
    usage: {prompt_tokens: 5, completion_tokens: 9, total_tokens: 14}})));
    assert.deepEqual(jsonTap.end(), {finishReason: "tool_calls", promptTokens: 5, completionTokens: 9, error: undefined});
    assert.deepEqual(whole, ["now{}"]);
});

test("the proxy's tap: without usage, llama.cpp's `timings` give the counts (cached + evaluated prompt); usage, when sent, wins", () => {
    const sse = (...chunks: object[]): Buffer => Buffer.from(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("") + "data: [DONE]\n\n");
    const last = (timings: object) => ({choices: [{index: 0, text: "", finish_reason: "length"}], timings});
    const timings = {cache_n: 3, prompt_n: 5, prompt_ms: 1, prompt_per_token_ms: 0.2, prompt_per_second: 5000,
        predicted_n: 7, predicted_ms: 7, predicted_per_token_ms: 1, predicted_per_second: 1000};
    const counts = (...chunks: object[]) => {
        const tap = createTap("sse", () => undefined);
        tap.write(sse(...chunks));
        const end = tap.end();
        return [end.promptTokens, end.completionTokens];
    };
    assert.deepEqual(counts(chat({content: "Hi"}), last(timings)), [8, 7]);
    assert.deepEqual(counts(chat({content: "Hi"}), last({...timings, cache_n: undefined})), [5, 7], "a server without cache_n");
    assert.deepEqual(counts(chat({content: "Hi"})), [undefined, undefined], "neither: the proxy counts chunks");
    assert.deepEqual(counts(last({...timings, predicted_n: -1})), [undefined, undefined], "not counts");
    assert.deepEqual(counts(last({...timings, prompt_n: "5"})), [undefined, undefined]);
    const usage = {choices: [], usage: {prompt_tokens: 9, completion_tokens: 6, total_tokens: 15}};
    assert.deepEqual(counts(usage, last(timings)), [9, 6], "timings after usage do not override it");
    assert.deepEqual(counts(last(timings), usage), [9, 6]);
});
