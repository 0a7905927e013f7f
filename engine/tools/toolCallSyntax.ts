/**
 * How a model writes a tool call, as node-llama-cpp's chat wrapper for it knows (for a Jinja template
 * with tool support, read from the template by rendering a sample call; otherwise node-llama-cpp's own
 * syntax, which its wrapper documents in the system prompt): the text before the function's name, between
 * the name and the JSON arguments, and after them; and for several calls in one answer, the text around and
 * between them. `{{functionName}}` in `paramsPrefix` / `suffix` stands for the called function's name.
 */
export type ToolCallSyntax = {
    prefix: string,
    /** Other ways the model may begin a call (node-llama-cpp's `prefixAlternateMatches`). */
    prefixAlternates: string[],
    paramsPrefix: string,
    suffix: string,
    /** Text that opens the calls of one answer; "" when calls simply follow one another. */
    sectionPrefix: string,
    betweenCalls: string,
    sectionSuffix: string,
    /** Whether the model may make several calls in one answer (the wrapper defines a syntax for it). */
    parallel: boolean
};

/** What node-llama-cpp's ChatWrapperSettings["functions"] holds (strings or LlamaText values). */
export type WrapperFunctionSettings = {
    call: {prefix: unknown, paramsPrefix: unknown, suffix: unknown, prefixAlternateMatches?: unknown[]},
    parallelism?: {call: {sectionPrefix: unknown, betweenCalls?: unknown, sectionSuffix?: unknown}}
};

/** `text(value)`: a setting as plain text (node-llama-cpp's `LlamaText(value).toString()`). */
export function toolCallSyntaxOf(functions: WrapperFunctionSettings, text: (value: unknown) => string): ToolCallSyntax {
    const {call, parallelism} = functions;
    return {
        prefix: text(call.prefix),
        prefixAlternates: (call.prefixAlternateMatches ?? []).map(text).filter((alternate) => alternate !== ""),
        paramsPrefix: text(call.paramsPrefix),
        suffix: text(call.suffix),
        sectionPrefix: parallelism === undefined ? "" : text(parallelism.call.sectionPrefix),
        betweenCalls: parallelism?.call.betweenCalls === undefined ? "" : text(parallelism.call.betweenCalls),
        sectionSuffix: parallelism?.call.sectionSuffix === undefined ? "" : text(parallelism.call.sectionSuffix),
        parallel: parallelism !== undefined
    };
}

/** A syntax part with the function's name filled in. */
export function withFunctionName(part: string, name: string): string {
    return part.replaceAll("{{functionName}}", name);
}
