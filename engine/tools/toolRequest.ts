/** A request's tools as the engine checks and uses them. */
import {toolNamePattern, type GenerateRequest, type ToolDefinition} from "../../protocol/engineMessages.js";

/** Why a request's tools cannot be served, or undefined when they can. */
export function invalidTools(request: Pick<GenerateRequest, "tools" | "toolChoice" | "responseFormat" | "ignoreEos">): string | undefined {
    const names = new Set<string>();
    for (const tool of request.tools ?? []) {
        if (!toolNamePattern.test(tool.name))
            return `tools: a function name must be 1 to 64 letters, digits, "_" or "-", got ${JSON.stringify(tool.name.slice(0, 80))}`;
        if (names.has(tool.name))
            return `tools: the function ${tool.name} is given twice`;
        names.add(tool.name);
    }
    const choice = request.toolChoice;
    if (choice === undefined || choice === "auto")
        return undefined;
    if (typeof choice === "object" && !names.has(choice.name))
        return `toolChoice: the function ${JSON.stringify(choice.name)} is not among the tools`;
    if (request.responseFormat !== undefined)
        return "toolChoice: a forced tool call and a response format cannot both constrain the output";
    if (request.ignoreEos === true)
        return "toolChoice: a forced tool call ends when the call is complete, which ignoreEos forbids";
    return undefined;
}

/** The functions a forced call may call: the named one, or any. */
export function requiredTools(request: Pick<GenerateRequest, "tools" | "toolChoice">): ToolDefinition[] {
    const choice = request.toolChoice;
    const tools = request.tools ?? [];
    return typeof choice === "object" ? tools.filter((tool) => tool.name === choice.name) : tools;
}

/** Whether a forced call may be followed by more: not for a named function (one call of it), else as the request says (default yes). */
export function parallelCalls(request: Pick<GenerateRequest, "toolChoice" | "parallelToolCalls">): boolean {
    return typeof request.toolChoice === "object" ? false : request.parallelToolCalls ?? true;
}
