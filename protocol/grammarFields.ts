/**
 * Grammar-constrained output as llama.cpp's server and vLLM ask for it, read into the engine's ResponseFormat:
 *
 * - llama.cpp: `grammar`, a GBNF grammar (its rule `root` is the whole output), on `/completion`, `/infill` and the
 *   OpenAI-compatible endpoints;
 * - vLLM: `structured_outputs` with one of `json` (a JSON schema), `choice` (the output is exactly one of these
 *   strings) or `grammar` (GBNF: vLLM's xgrammar backend reads llama.cpp's format); and the fields it had before
 *   v0.12, `guided_json`, `guided_choice`, `guided_grammar`.
 *
 * Regular expressions (`structured_outputs.regex`, `guided_regex`) and structural tags have no grammar here and are
 * refused with a 400 that says so, as are two constraints in one request.
 */
import {maxGrammarLength, type ResponseFormat} from "./engineMessages.js";
import {fail} from "./openaiFields.js";
import {schemaFormat} from "./openaiSampling.js";
import {isObject, type JsonObject} from "./validation.js";

/** The most strings a `choice` may list, and the longest one. */
export const maxChoices = 1024;
export const maxChoiceLength = 4096;

/** A constraint and the request field that gave it (for errors naming it). */
export type GrammarConstraint = {format: ResponseFormat, param: string};

/** vLLM's `structured_outputs` keys this server cannot enforce. */
const unsupportedKeys = ["regex", "structural_tag"] as const;
const supportedKeys = ["json", "choice", "grammar"] as const;

/** The grammar constraint a request body gives, if any; throws ApiRequestError for a bad or unsupported one. */
export function parseGrammarConstraint(body: JsonObject): GrammarConstraint | undefined {
    const found: GrammarConstraint[] = [];
    const grammar = body.grammar;
    // llama-server treats an empty grammar as none.
    if (grammar !== undefined && grammar !== null && grammar !== "")
        found.push({format: grammarFormat(grammar, "grammar"), param: "grammar"});
    const structured = body.structured_outputs;
    if (structured !== undefined && structured !== null) {
        if (!isObject(structured))
            fail("structured_outputs", "expected an object");
        for (const key of unsupportedKeys)
            if (structured[key] !== undefined && structured[key] !== null)
                fail(`structured_outputs.${key}`, `${key === "regex" ? "regular expressions" : "structural tags"} are not served here; ` +
                    "json, choice or grammar (GBNF) are");
        for (const key of supportedKeys)
            if (structured[key] !== undefined && structured[key] !== null)
                found.push({format: constraintFormat(key, structured[key], `structured_outputs.${key}`), param: `structured_outputs.${key}`});
    }
    if (body.guided_regex !== undefined && body.guided_regex !== null)
        fail("guided_regex", "regular expressions are not served here; guided_json, guided_choice or guided_grammar (GBNF) are");
    for (const key of supportedKeys) {
        const param = `guided_${key}`;
        if (body[param] !== undefined && body[param] !== null)
            found.push({format: constraintFormat(key, body[param], param), param});
    }
    if (found.length > 1)
        fail(found[1]!.param, `give one output constraint, not ${found.map((constraint) => constraint.param).join(" and ")}`);
    return found[0];
}

function constraintFormat(key: typeof supportedKeys[number], value: unknown, param: string): ResponseFormat {
    switch (key) {
        case "json":
            // vLLM takes the schema as an object or as its JSON text.
            return schemaFormat(typeof value === "string" ? parseSchemaText(value, param) : expectSchema(value, param), param);
        case "choice":
            return {type: "grammar", grammar: choiceGrammar(parseChoices(value, param))};
        case "grammar":
            return grammarFormat(value, param);
    }
}

function grammarFormat(value: unknown, param: string): ResponseFormat {
    if (typeof value !== "string")
        fail(param, "expected a GBNF grammar (a string)");
    if (value.length > maxGrammarLength)
        fail(param, `longer than ${maxGrammarLength} characters`);
    if (!/(^|\s)root\s*::=/.test(value))
        fail(param, "a GBNF grammar needs a rule named root (the whole output), e.g. root ::= \"yes\" | \"no\"");
    return {type: "grammar", grammar: value};
}

function expectSchema(value: unknown, param: string): JsonObject {
    if (!isObject(value))
        fail(param, "expected a JSON schema (an object, or its JSON text)");
    return value;
}

function parseSchemaText(text: string, param: string): JsonObject {
    let value: unknown;
    try {
        value = JSON.parse(text);
    } catch {
        fail(param, "expected a JSON schema; the string is not JSON");
    }
    return expectSchema(value, param);
}

function parseChoices(value: unknown, param: string): string[] {
    if (!Array.isArray(value) || value.length === 0 || value.length > maxChoices)
        fail(param, `expected an array of 1 to ${maxChoices} strings`);
    return value.map((choice, index) => {
        if (typeof choice !== "string" || choice === "" || choice.length > maxChoiceLength)
            fail(`${param}[${index}]`, `expected a non-empty string of at most ${maxChoiceLength} characters`);
        return choice;
    });
}

/** A GBNF grammar whose output is exactly one of `choices`. */
export function choiceGrammar(choices: readonly string[]): string {
    return `root ::= ${choices.map(gbnfLiteral).join(" | ")}\n`;
}

/** `text` as a GBNF string literal: quotes and backslashes escaped, control characters as `\xHH`. */
function gbnfLiteral(text: string): string {
    let literal = "\"";
    for (const char of text) {
        const code = char.codePointAt(0)!;
        if (char === "\"" || char === "\\")
            literal += `\\${char}`;
        else if (code < 0x20 || code === 0x7f)
            literal += `\\x${code.toString(16).padStart(2, "0")}`;
        else
            literal += char;
    }
    return `${literal}"`;
}
