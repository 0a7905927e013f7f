/**
 * Structured output (OpenAI's `response_format`): a request for JSON samples under a grammar, so every
 * token keeps the text a prefix of valid JSON — any JSON object (`json_object`, node-llama-cpp's `json`
 * grammar) or one that fits a JSON schema (`json_schema`, node-llama-cpp's schema-to-grammar converter).
 * Grammars are built once per distinct format and shared; each request gets its own evaluation state.
 */
import type {ResponseFormat} from "../protocol/engineMessages.js";
import {grammarSchema, unsupportedSchemaPart} from "../protocol/jsonSchemaSubset.js";
import type {Llama, LlamaGrammar, LlamaGrammarEvaluationState, LlamaModel, LlamaGrammarEvaluationStateClass} from "./llamaTypes.js";

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

    private grammarFor(format: ResponseFormat): Promise<LlamaGrammar> {
        // Checked before anything walks the schema (its size and depth are bounded there).
        const unsupported = format.type === "json_schema" ? unsupportedSchemaPart(format.schema) : undefined;
        if (unsupported !== undefined)
            return Promise.reject(new ResponseFormatError(`this schema cannot be enforced ${unsupported}`));
        const key = format.type === "json_object" ? "json_object" : `json_schema:${JSON.stringify(format.schema)}`;
        let grammar = this.grammars.get(key);
        if (grammar === undefined) {
            grammar = this.build(format);
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

    private async build(format: ResponseFormat): Promise<LlamaGrammar> {
        if (format.type === "json_object")
            return await this.llama.getGrammarFor("json");
        try {
            // Checked by grammarFor against the subset node-llama-cpp's converter supports (its GbnfJsonSchema type).
            return await this.llama.createGrammarForJsonSchema(grammarSchema(format.schema) as Parameters<Llama["createGrammarForJsonSchema"]>[0]);
        } catch (error) {
            throw new ResponseFormatError(`the JSON schema cannot be turned into a grammar: ${error instanceof Error ? error.message : String(error)}`);
        }
    }
}
