/**
 * VS Code's language model messages and tools in the engine's terms, and the engine's tool calls back in
 * VS Code's: text parts become content, an assistant's tool-call parts its `toolCalls`, a user message's
 * tool-result parts `tool` messages (before the message's own text), as OpenAI-style chats order them.
 */
import * as vscode from "vscode";
import type {ChatMessage, GeneratedToolCall, ToolDefinition} from "../../protocol/engineMessages.js";
import {isObject} from "../../protocol/validation.js";

/** The text parts of a message or tool result (other parts have no text for this model). */
export function textOf(parts: readonly unknown[]): string {
    return parts.map((part) => part instanceof vscode.LanguageModelTextPart ? part.value : "").join("");
}

export function toChatMessages(messages: readonly vscode.LanguageModelChatRequestMessage[]): ChatMessage[] {
    return messages.flatMap((message): ChatMessage[] => {
        const content = textOf(message.content);
        if (message.role === vscode.LanguageModelChatMessageRole.Assistant) {
            const toolCalls = message.content.filter((part) => part instanceof vscode.LanguageModelToolCallPart)
                .map((part) => ({id: part.callId, name: part.name, arguments: JSON.stringify(part.input)}));
            return [{role: "assistant", content, ...toolCalls.length > 0 ? {toolCalls} : {}}];
        }
        const results: ChatMessage[] = message.content.filter((part) => part instanceof vscode.LanguageModelToolResultPart)
            .map((part) => ({role: "tool", content: textOf(part.content), toolCallId: part.callId}));
        return results.length > 0 && content === "" ? results : [...results, {role: "user", content}];
    });
}

export function toToolDefinitions(tools: readonly vscode.LanguageModelChatTool[]): ToolDefinition[] {
    return tools.map((tool) => ({name: tool.name, description: tool.description,
        ...isObject(tool.inputSchema) ? {parameters: tool.inputSchema} : {}}));
}

/** An engine tool call as VS Code's part, with an id of its own; its arguments are the JSON object the model wrote. */
export function toToolCallPart(call: GeneratedToolCall, callId: string): vscode.LanguageModelToolCallPart {
    const input: unknown = JSON.parse(call.arguments);
    return new vscode.LanguageModelToolCallPart(callId, call.name, isObject(input) ? input : {value: input});
}
