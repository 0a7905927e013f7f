/**
 * Grammar-constrained output through the official `openai` client on a real engine (the tiny random-weight model,
 * which without a grammar writes anything): llama.cpp's `grammar` (GBNF) and vLLM's `structured_outputs` (`choice`,
 * `json`, `grammar`) and its older `guided_*` fields, on chat and completions, streamed or not; what cannot be
 * enforced or does not parse is refused with a 400 naming the field, and the engine serves on.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

type ChatParams = OpenAI.ChatCompletionCreateParamsNonStreaming;
/** The request fields the SDK does not type (vLLM's and llama.cpp's extensions), sent as they are. */
type Extra = Record<string, unknown>;

/** "yes" or "no", a space, then one or two digits; and the same as a regular expression over the whole text. */
const answerGrammar = "root ::= answer \" \" digit digit?\nanswer ::= \"yes\" | \"no\"\ndigit ::= [0-9]\n";
const answerPattern = /^(yes|no) [0-9][0-9]?$/;

/** Choices a GBNF literal must escape: a quote, a backslash, a newline; and non-ASCII text. */
const trickyChoices = ["say \"hi\"", "C:\\temp", "two\nlines", "café ☕"];

describe("OpenAI-compatible endpoint: grammars (llama.cpp's grammar, vLLM's structured_outputs)", () => {
    const api = apiForSuite({mode: "inProcess"});

    const chat = async (seed: number, extra: Extra, maxTokens = 40): Promise<OpenAI.ChatCompletion> =>
        await api.openai.chat.completions.create({model: "m", messages: [{role: "user", content: "Answer"}], max_tokens: maxTokens, seed,
            temperature: 1, ...extra} as ChatParams);

    test("grammar (GBNF) on chat: every sampled answer fits it and ends by itself; without it the text does not", async () => {
        for (const seed of [1, 2, 3, 4, 5]) {
            const choice = (await chat(seed, {grammar: answerGrammar})).choices[0]!;
            assert.match(choice.message.content ?? "", answerPattern);
            assert.equal(choice.finish_reason, "stop", "the grammar is complete: only the end of text may follow");
        }
        const free = (await chat(1, {})).choices[0]!.message.content ?? "";
        assert.doesNotMatch(free, answerPattern, "plain sampling fitted the grammar by chance");
    });

    test("grammar on completions, streamed: the pieces add up to text that fits it", async () => {
        const stream = await api.openai.completions.create({model: "m", prompt: "Once upon a time", max_tokens: 40, seed: 3, temperature: 1,
            stream: true, grammar: answerGrammar} as OpenAI.CompletionCreateParamsStreaming);
        let text = "";
        let finish: string | null = null;
        for await (const chunk of stream) {
            text += chunk.choices[0]?.text ?? "";
            finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        assert.match(text, answerPattern);
        assert.equal(finish, "stop");
    });

    test("structured_outputs.choice and guided_choice: exactly one of the strings, escaped into the grammar as written", async () => {
        const seen = new Set<string>();
        for (const seed of [1, 2, 3, 4, 5, 6]) {
            const choice = (await chat(seed, {structured_outputs: {choice: trickyChoices}}, 60)).choices[0]!;
            assert.ok(trickyChoices.includes(choice.message.content ?? ""), JSON.stringify(choice.message.content));
            assert.equal(choice.finish_reason, "stop");
            seen.add(choice.message.content!);
        }
        assert.ok(seen.size >= 2, `sampling at temperature 1 picks among the choices: ${[...seen].join(" | ")}`);
        const legacy = await api.openai.completions.create({model: "m", prompt: "Pick", max_tokens: 20, seed: 1,
            guided_choice: ["alpha", "beta"]} as OpenAI.CompletionCreateParamsNonStreaming);
        assert.ok(["alpha", "beta"].includes(legacy.choices[0]!.text), legacy.choices[0]!.text);
    });

    test("structured_outputs.json (a schema object or its JSON text) and guided_grammar", async () => {
        const schema = {type: "object", additionalProperties: false, required: ["ok"], properties: {ok: {type: "boolean"}}};
        for (const json of [schema, JSON.stringify(schema)]) {
            const text = (await chat(2, {structured_outputs: {json}}, 60)).choices[0]!.message.content ?? "";
            assert.equal(typeof (JSON.parse(text) as {ok: unknown}).ok, "boolean", text);
        }
        const viaGuided = (await chat(4, {guided_grammar: answerGrammar})).choices[0]!.message.content ?? "";
        assert.match(viaGuided, answerPattern);
    });

    test("refused with a 400 naming the field; the engine serves on", async () => {
        const cases: Array<[Extra, string, RegExp]> = [
            [{grammar: "root ::= undefined-rule"}, "grammar", /could not parse it as GBNF/],
            [{grammar: "root ::= root \"a\""}, "grammar", /could not parse it as GBNF/],
            [{grammar: "answer ::= \"yes\""}, "grammar", /needs a rule named root/],
            [{grammar: 42}, "grammar", /expected a GBNF grammar/],
            [{structured_outputs: {regex: "[a-z]+"}}, "structured_outputs.regex", /regular expressions are not served here/],
            [{guided_regex: "[a-z]+"}, "guided_regex", /regular expressions are not served here/],
            [{structured_outputs: {choice: []}}, "structured_outputs.choice", /expected an array of 1 to/],
            [{structured_outputs: {choice: ["a", ""]}}, "structured_outputs.choice[1]", /non-empty string/],
            [{structured_outputs: {json: "{not json"}}, "structured_outputs.json", /not JSON/],
            [{grammar: answerGrammar, structured_outputs: {choice: ["a"]}}, "structured_outputs.choice", /give one output constraint/],
            [{grammar: answerGrammar, response_format: {type: "json_object"}}, "grammar", /not response_format and grammar/],
            [{grammar: answerGrammar, tools: [{type: "function", function: {name: "f"}}], tool_choice: "required"}, "grammar",
                /cannot be used with a tool_choice that demands a call/]
        ];
        for (const [extra, param, message] of cases)
            await assert.rejects(chat(1, extra), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${String(error)}`);
                assert.equal(error.param, param, JSON.stringify(extra));
                assert.match(error.message, message);
                return true;
            });
        // An empty grammar is no grammar, as llama-server reads it.
        assert.ok((await chat(1, {grammar: ""})).choices[0]!.message.content !== undefined);
        assert.match((await chat(5, {grammar: answerGrammar})).choices[0]!.message.content ?? "", answerPattern);
    });
});
