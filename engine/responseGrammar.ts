/**
 * Structured output (OpenAI's `response_format`): a request for JSON samples under a grammar, so every
 * token keeps the text a prefix of valid JSON — any JSON object (`json_object`, node-llama-cpp's `json`
 * grammar) or one that fits a JSON schema (`json_schema`, node-llama-cpp's schema-to-grammar converter);
 * a request with a GBNF grammar (llama.cpp's `grammar`, vLLM's `structured_outputs`) samples under that one.
 * A request that must call a tool samples under the grammar of a call (tools/toolCallGrammar.ts).
 * Grammars are built once per distinct format or tool set and shared; each request gets its own evaluation state.
 */
import type {ResponseFormat, ToolDefinition} from "../protocol/engineMessages.js";
import {grammarSchema, unsupportedSchemaPart} from "../protocol/jsonSchemaSubset.js";
import type {Llama, LlamaGrammar, LlamaGrammarEvaluationState, LlamaModel, LlamaGrammarEvaluationStateClass} from "./llamaTypes.js";
import {errorMessage} from "../common/errorMessage.js";
import {embeddableJsonGrammar, toolCallGrammar} from "./tools/toolCallGrammar.js";
import type {ToolCallSyntax} from "./tools/toolCallSyntax.js";

/** Grammars kept for reuse (a client sends the same schema with every request; an unbounded set of schemas must not grow memory). */
const maxCachedGrammars = 32;

/**
 * Ends a JSON generation when the model keeps emitting blank lines after the value (the grammars allow
 * trailing whitespace): node-llama-cpp's own JSON grammars stop on it too. It cannot occur inside JSON
 * text (strings hold no raw newlines, and the grammars allow one newline between tokens).
 */
export const jsonGrammarStop = "\n\n\n\n";

/** The format cannot be turned into a grammar (a schema node-llama-cpp's converter does not support). */
export class ResponseFormatError extends Error {
    override readonly name = "ResponseFormatError";
}

export class ResponseGrammars {
    private readonly grammars = new Map<string, Promise<LlamaGrammar>>();

    constructor(private readonly llama: Llama, private readonly model: LlamaModel,
        private readonly GrammarState: LlamaGrammarEvaluationStateClass) {}

    /** A fresh evaluation state for one request; throws ResponseFormatError for a schema that cannot be used. */
    async stateFor(format: ResponseFormat): Promise<LlamaGrammarEvaluationState> {
        const grammar = await this.grammarFor(format);
        return new this.GrammarState({model: this.model, grammar});
    }

    /**
     * A fresh state for a request that must call one of `tools` (in the model's call `syntax`); throws
     * ResponseFormatError for a schema that cannot be used.
     */
    async toolCallStateFor(
        syntax: ToolCallSyntax, tools: readonly ToolDefinition[], parallel: boolean
    ): Promise<LlamaGrammarEvaluationState> {
        for (const tool of tools) {
            const unsupported = tool.parameters === undefined ? undefined : unsupportedSchemaPart(tool.parameters);
            if (unsupported !== undefined)
                throw new ResponseFormatError(`the parameters of tool ${tool.name} cannot be enforced ${unsupported}`);
        }
        const key = `tools:${JSON.stringify([syntax, tools.map((tool) => [tool.name, tool.parameters]), parallel])}`;
        const grammar = await this.cached(key, () => this.buildToolCall(syntax, tools, parallel));
        return new this.GrammarState({model: this.model, grammar});
    }

    private grammarFor(format: ResponseFormat): Promise<LlamaGrammar> {
        // Checked before anything walks the schema (its size and depth are bounded there).
        const unsupported = format.type === "json_schema" ? unsupportedSchemaPart(format.schema) : undefined;
        if (unsupported !== undefined)
            return Promise.reject(new ResponseFormatError(`this schema cannot be enforced ${unsupported}`));
        const key = format.type === "json_object" ? "json_object"
            : format.type === "grammar" ? `grammar:${format.grammar}` : `json_schema:${JSON.stringify(format.schema)}`;
        return this.cached(key, () => this.build(format));
    }

    private cached(key: string, build: () => Promise<LlamaGrammar>): Promise<LlamaGrammar> {
        let grammar = this.grammars.get(key);
        if (grammar === undefined) {
            grammar = build();
            // A failed build is not kept: the error goes to this request only.
            grammar.catch(() => this.grammars.delete(key));
            this.grammars.set(key, grammar);
            if (this.grammars.size > maxCachedGrammars)
                this.grammars.delete(this.grammars.keys().next().value!);
        } else {
            // Most recently used last, so the oldest unused one goes first.
            this.grammars.delete(key);
            this.grammars.set(key, grammar);
        }
        return grammar;
    }

    private async buildToolCall(syntax: ToolCallSyntax, tools: readonly ToolDefinition[], parallel: boolean): Promise<LlamaGrammar> {
        const grammarTools = [];
        for (const [index, tool] of tools.entries()) {
            const rulePrefix = `tool${index}-`;
            if (tool.parameters === undefined) {
                grammarTools.push({name: tool.name, rulePrefix, argumentsGrammar: undefined});
                continue;
            }
            const schemaGrammar = await this.jsonSchemaGrammar(tool.parameters, `the parameters of tool ${tool.name}`);
            grammarTools.push({name: tool.name, rulePrefix, argumentsGrammar: embeddableJsonGrammar(schemaGrammar.grammar, rulePrefix)});
        }
        try {
            return await this.llama.createGrammar({grammar: toolCallGrammar(syntax, grammarTools, parallel)});
        } catch (error) {
            throw new Error(`could not build the tool-call grammar: ${error instanceof Error ? error.message : String(error)}`, {cause: error});
        }
    }

    private async jsonSchemaGrammar(schema: unknown, what: string): Promise<LlamaGrammar> {
        try {
            // Checked against the subset node-llama-cpp's converter supports (its GbnfJsonSchema type).
            return await this.llama.createGrammarForJsonSchema(grammarSchema(schema) as Parameters<Llama["createGrammarForJsonSchema"]>[0]);
        } catch (error) {
            throw new ResponseFormatError(`${what} cannot be turned into a grammar: ${error instanceof Error ? error.message : String(error)}`);
        }
    }

    private async build(format: ResponseFormat): Promise<LlamaGrammar> {
        if (format.type === "json_object")
            return await this.llama.getGrammarFor("json");
        if (format.type === "grammar")
            return await this.gbnfGrammar(format.grammar);
        return await this.jsonSchemaGrammar(format.schema, "the JSON schema");
    }

    /**
     * A client's GBNF grammar; one that llama.cpp cannot parse is refused. Its parser writes the reason to the process's
     * stderr only (not to the log node-llama-cpp forwards), so the answer can only say that it failed, as llama-server's.
     */
    private async gbnfGrammar(text: string): Promise<LlamaGrammar> {
        try {
            return await this.llama.createGrammar({grammar: text});
        } catch (error) {
            throw new ResponseFormatError(`llama.cpp could not parse it as GBNF (${errorMessage(error)}): every rule used must be defined, ` +
                "none may be left-recursive, and the output is rule root; the format: llama.cpp's grammars/README.md");
        }
    }
}
