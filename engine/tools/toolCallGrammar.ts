/**
 * The grammar that makes a model call a tool (`toolChoice` "required" or a named function): the call
 * syntax of the model's template around each offered function's name and its arguments, which follow the
 * function's parameter schema. Each schema's grammar comes from node-llama-cpp's converter (its JSON
 * schema grammar, GBNF text); the rules of each are renamed apart and joined under one root.
 */
import {withFunctionName, type ToolCallSyntax} from "./toolCallSyntax.js";

/** How node-llama-cpp 3.21's JSON schema grammars end their root rule: a run of newlines that ends generation. */
const jsonGrammarEnding = " \"\\n\\n\\n\\n\" [\\n]*";

/** A GBNF string literal (JSON's string escapes are GBNF's). */
function literal(text: string): string {
    return JSON.stringify(text);
}

/** A sequence of GBNF elements, empty literals left out. */
function sequence(...elements: string[]): string {
    return elements.filter((element) => element !== "\"\"").join(" ");
}

/** `body` with every rule reference renamed by `rename`; string literals, character classes and repetition counts untouched. */
function renameReferences(body: string, rename: (name: string) => string): string {
    let out = "";
    let i = 0;
    while (i < body.length) {
        const char = body[i]!;
        if (char === "\"" || char === "[") {
            const close = char === "\"" ? "\"" : "]";
            let j = i + 1;
            while (j < body.length && body[j] !== close)
                j += body[j] === "\\" ? 2 : 1;
            out += body.slice(i, j + 1);
            i = j + 1;
        } else if (char === "{") {
            const j = body.indexOf("}", i);
            out += body.slice(i, j + 1);
            i = j + 1;
        } else if (/[A-Za-z]/.test(char)) {
            let j = i;
            while (j < body.length && /[A-Za-z0-9_-]/.test(body[j]!))
                j++;
            out += rename(body.slice(i, j));
            i = j;
        } else {
            out += char;
            i++;
        }
    }
    return out;
}

/**
 * node-llama-cpp's grammar for one schema, its rules prefixed with `prefix`, its root (`${prefix}root`)
 * without the trailing newlines that end a JSON generation (here the call's suffix follows).
 */
export function embeddableJsonGrammar(grammarText: string, prefix: string): string {
    const rules = grammarText.trim().split(/\n(?=[A-Za-z0-9_-]+ ::= )/);
    return rules.map((rule) => {
        const separator = rule.indexOf(" ::= ");
        if (separator === -1)
            throw new Error(`unexpected grammar rule: ${rule.slice(0, 80)}`);
        const name = rule.slice(0, separator);
        let body = rule.slice(separator + 5);
        if (name === "root") {
            if (!body.endsWith(jsonGrammarEnding))
                throw new Error("unexpected JSON schema grammar: its root does not end with the JSON stop");
            body = body.slice(0, -jsonGrammarEnding.length);
        }
        return `${prefix}${name} ::= ${renameReferences(body, (reference) => `${prefix}${reference}`)}`;
    }).join("\n");
}

/**
 * One offered function: its name and its arguments' grammar (embeddableJsonGrammar's text, root
 * `${rulePrefix}root`), or none for a function without parameters (`{}`).
 */
export type GrammarTool = {name: string, rulePrefix: string, argumentsGrammar: string | undefined};

/** The whole grammar: one call (or, with `parallel` and a syntax for it, one or more) of one of `tools`. */
export function toolCallGrammar(syntax: ToolCallSyntax, tools: readonly GrammarTool[], parallel: boolean): string {
    const functions = tools.map((tool, index) => {
        const args = tool.argumentsGrammar === undefined ? literal("{}") : `${tool.rulePrefix}root`;
        return `function${index} ::= ` + sequence(literal(tool.name), literal(withFunctionName(syntax.paramsPrefix, tool.name)), args,
            literal(withFunctionName(syntax.suffix, tool.name)));
    });
    const call = `call ::= ${sequence(literal(syntax.prefix), `(${tools.map((_, index) => `function${index}`).join(" | ")})`)}`;
    const root = parallel && syntax.parallel
        ? `root ::= ${sequence(literal(syntax.sectionPrefix), "call", `(${sequence(literal(syntax.betweenCalls), "call")})*`, literal(syntax.sectionSuffix))}`
        : "root ::= call";
    return [root, call, ...functions, ...tools.flatMap((tool) => tool.argumentsGrammar ?? [])].join("\n");
}
