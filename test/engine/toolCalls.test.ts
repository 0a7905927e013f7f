/**
 * Tool calls out of streamed text (engine/tools/toolCallExtractor.ts) in the two syntaxes node-llama-cpp
 * gives: one read from a template that writes JSON inside <tool_call> tags, and its own `||call: name(…)`;
 * and the call grammar's pieces (engine/tools/toolCallGrammar.ts). The grammar's effect on a real model is
 * in test/api/toolCalls.test.ts.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import {chatHistoryOf} from "../../engine/chatHistory.js";
import {ToolCallExtractor, parseToolCalls} from "../../engine/tools/toolCallExtractor.js";
import {embeddableJsonGrammar, toolCallGrammar} from "../../engine/tools/toolCallGrammar.js";
import type {ToolCallSyntax} from "../../engine/tools/toolCallSyntax.js";

/** What node-llama-cpp 3.21 reads from test/helpers/toolTemplates.ts's chatmlTools template (checked in test/api/toolCalls.test.ts). */
const tagged: ToolCallSyntax = {prefix: "<tool_call>\n{\"name\": \"", prefixAlternates: [], paramsPrefix: "\", \"arguments\": ",
    suffix: "}\n</tool_call>", sectionPrefix: "", betweenCalls: "", sectionSuffix: "", parallel: true};
/** node-llama-cpp's own syntax (ChatWrapper.defaultSettings.functions). */
const plain: ToolCallSyntax = {prefix: "||call: ", prefixAlternates: ["||call:"], paramsPrefix: "(", suffix: ")", sectionPrefix: "",
    betweenCalls: "", sectionSuffix: "", parallel: false};
const names = new Set(["get_weather", "now"]);

/** Streams `text` through an extractor in pieces of `size` characters; returns what was output on the way and at the end. */
function stream(syntax: ToolCallSyntax, text: string, size: number): {streamed: string[], final: ReturnType<ToolCallExtractor["finish"]>} {
    const extractor = new ToolCallExtractor(syntax, names);
    const streamed: string[] = [];
    for (let i = 0; i < text.length; i += size)
        streamed.push(extractor.push(text.slice(i, i + size)));
    return {streamed, final: extractor.finish()};
}

test("a tagged call after some text: the text streams, the call is parsed and none of it is output", () => {
    const text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>";
    for (const size of [1, 3, 7, text.length]) {
        const {streamed, final} = stream(tagged, text, size);
        assert.equal(streamed.join(""), "Let me look.\n", `piece size ${size}`);
        assert.deepEqual(final, {text: "", calls: [{name: "get_weather", arguments: "{\"city\": \"Paris\", \"days\": [1, 2]}"}]});
    }
    // A "<" that does not start a call is held only until the next text decides.
    const extractor = new ToolCallExtractor(tagged, names);
    assert.equal(extractor.push("a <"), "a ");
    assert.equal(extractor.push("b> c"), "<b> c");
    assert.deepEqual(extractor.finish(), {text: "", calls: []});
});

test("text that starts like a call but cannot be one streams on as soon as that is clear; a later call is still found", () => {
    const text = "Wrap calls in <tool_call> tags, like <b>this</b>. <tool_call>\n{\"name\": \"rm\", \"x\": 1} and then " +
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    const callStart = text.lastIndexOf("<tool_call>");
    for (const size of [1, 5, text.length]) {
        const extractor = new ToolCallExtractor(tagged, names);
        let streamed = "";
        for (let i = 0; i < text.length; i += size) {
            streamed += extractor.push(text.slice(i, i + size));
            const seen = Math.min(text.length, i + size);
            // "<tool_call> t" cannot be a call ("{" must follow), nor can a call of "rm" (no such function): out by then.
            if (seen >= text.indexOf(" tags") + 2 && seen <= callStart)
                assert.ok(streamed.includes("<tool_call> t"), `piece size ${size}, after ${seen} characters: ${JSON.stringify(streamed)}`);
            if (seen >= text.indexOf("\"rm\"") + 4 && seen <= callStart)
                assert.ok(streamed.includes("\"rm\""), `piece size ${size}, after ${seen} characters: ${JSON.stringify(streamed)}`);
        }
        assert.equal(streamed, text.slice(0, callStart), `piece size ${size}`);
        assert.deepEqual(extractor.finish(), {text: "", calls: [{name: "now", arguments: "{}"}]});
    }
});

test("whitespace that differs from the template's still parses; several calls in a row; text after them stays", () => {
    const text = "<tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>\n<tool_call>\n {\"name\": \"get_weather\",  \"arguments\":{\"city\":\"Rome\"} }\n</tool_call>\nDone.";
    assert.deepEqual(parseToolCalls(text, tagged, names), {text: "\nDone.", calls: [{name: "now", arguments: "{}"},
        {name: "get_weather", arguments: "{\"city\":\"Rome\"}"}]});
    // Braces and quotes inside strings do not end the arguments early.
    assert.deepEqual(parseToolCalls("<tool_call>\n{\"name\": \"now\", \"arguments\": {\"q\": \"}\\\"{\"}}\n</tool_call>", tagged, names).calls,
        [{name: "now", arguments: "{\"q\": \"}\\\"{\"}"}]);
});

test("what does not parse as a call goes back into the text: unknown function, broken JSON, a call cut short", () => {
    for (const text of [
        "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {oops}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
        "<tool_call> is how I would call a tool"
    ]) {
        const {streamed, final} = stream(tagged, `Answer: ${text}`, 4);
        assert.equal(streamed.join("") + final.text, `Answer: ${text}`);
        assert.deepEqual(final.calls, []);
    }
    // A whole call, then one cut short: the whole one counts, the rest is text.
    const cut = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"argu";
    assert.deepEqual(parseToolCalls(cut, tagged, names), {text: "\n<tool_call>\n{\"name\": \"now\", \"argu", calls: [{name: "now", arguments: "{}"}]});
});

test("node-llama-cpp's own syntax: ||call: name(arguments), its alternate prefix, and empty parentheses for no arguments", () => {
    assert.deepEqual(stream(plain, "Sure. ||call: get_weather({\"city\": \"Oslo\"})", 2).final.calls, [{name: "get_weather", arguments: "{\"city\": \"Oslo\"}"}]);
    assert.deepEqual(parseToolCalls("||call:now()", plain, names).calls, [{name: "now", arguments: "{}"}]);
});

test("{{functionName}} in the syntax stands for the called function", () => {
    const named: ToolCallSyntax = {...plain, prefix: "<function=", prefixAlternates: [], paramsPrefix: ">", suffix: "</function:{{functionName}}>"};
    assert.deepEqual(parseToolCalls("<function=now>{}</function:now>", named, names).calls, [{name: "now", arguments: "{}"}]);
    assert.deepEqual(parseToolCalls("<function=now>{}</function:get_weather>", named, names).calls, []);
});

test("embeddableJsonGrammar: every rule renamed apart, literals and classes untouched, the JSON stop taken off the root", () => {
    const grammar = [
        "root ::= \"{\" ws \"\\\"string-rule\\\"\" \":\" string-rule [a-z]{0,15} \"\\n\\n\\n\\n\" [\\n]*",
        "string-rule ::= \"\\\"\" [^\"\\\\\\x7F\\x00-\\x1F]* \"\\\"\"",
        "ws ::= [ ]?"
    ].join("\n");
    assert.equal(embeddableJsonGrammar(grammar, "t0-"), [
        "t0-root ::= \"{\" t0-ws \"\\\"string-rule\\\"\" \":\" t0-string-rule [a-z]{0,15}",
        "t0-string-rule ::= \"\\\"\" [^\"\\\\\\x7F\\x00-\\x1F]* \"\\\"\"",
        "t0-ws ::= [ ]?"
    ].join("\n"));
    assert.throws(() => embeddableJsonGrammar("root ::= \"x\"", "t0-"), /does not end with the JSON stop/);
});

test("toolCallGrammar: the template's text around each function's name and arguments; one call unless parallel calls have a syntax", () => {
    const tools = [{name: "now", rulePrefix: "tool0-", argumentsGrammar: undefined}, {name: "get_weather", rulePrefix: "tool1-", argumentsGrammar: "tool1-root ::= \"{}\""}];
    assert.equal(toolCallGrammar(plain, tools, true), [
        "root ::= call",
        "call ::= \"||call: \" (function0 | function1)",
        "function0 ::= \"now\" \"(\" \"{}\" \")\"",
        "function1 ::= \"get_weather\" \"(\" tool1-root \")\"",
        "tool1-root ::= \"{}\""
    ].join("\n"));
    assert.match(toolCallGrammar(tagged, tools, true), /^root ::= call \(call\)\*$/m);
    assert.match(toolCallGrammar(tagged, tools, false), /^root ::= call$/m);
});

test("chat history: an assistant's calls become function calls, each tool message the result of the call it names", () => {
    const history = chatHistoryOf([
        {role: "user", content: "Weather?"},
        {role: "assistant", content: "", toolCalls: [{id: "a", name: "get_weather", arguments: "{\"city\":\"Oslo\"}"}, {id: "b", name: "now", arguments: "{}"}]},
        {role: "tool", content: "12:00", toolCallId: "b"},
        {role: "tool", content: "5 C", toolCallId: "a"},
        {role: "assistant", content: "5 C at noon."}
    ]);
    assert.deepEqual(history, [
        {type: "user", text: "Weather?"},
        {type: "model", response: [{type: "functionCall", name: "get_weather", params: {city: "Oslo"}, result: "5 C"},
            {type: "functionCall", name: "now", params: {}, result: "12:00"}]},
        {type: "model", response: ["5 C at noon."]}
    ]);
    assert.throws(() => chatHistoryOf([{role: "tool", content: "x", toolCallId: "a"}]), /must answer a tool call/);
    assert.throws(() => chatHistoryOf([{role: "assistant", content: "", toolCalls: [{id: "a", name: "now", arguments: "{"}]}]), /arguments: not JSON/);
});
