/**
 * OpenAI-style chat messages as node-llama-cpp's chat history: an assistant message's tool calls become
 * function-call items of its response, and each `tool` message becomes the result of the call it answers
 * (by `toolCallId`, else the earliest call still without a result), where the template renders it; an assistant's
 * reasoning becomes a thought segment before its text (the template decides whether past reasoning is kept).
 */
import type {ChatMessage} from "../protocol/engineMessages.js";
import type {ChatHistoryItem} from "./llamaTypes.js";

/** The request's messages cannot be rendered (the caller's mistake); `PromptInputError` wraps it. */
export class ChatHistoryError extends Error {
    override readonly name = "ChatHistoryError";
}

type ModelResponse = Extract<ChatHistoryItem, {type: "model"}>["response"];
type FunctionCallItem = Extract<ModelResponse[number], {type: "functionCall"}>;

export function chatHistoryOf(messages: readonly ChatMessage[]): ChatHistoryItem[] {
    const history: ChatHistoryItem[] = [];
    // The calls of the last assistant message still without a result; a tool message fills one in.
    let unanswered: Array<{id: string, item: FunctionCallItem}> = [];
    for (const [index, message] of messages.entries()) {
        if (message.role === "system")
            history.push({type: "system", text: message.content});
        else if (message.role === "user")
            history.push({type: "user", text: message.content});
        else if (message.role === "assistant") {
            unanswered = (message.toolCalls ?? []).map((call, callIndex) => {
                let params: unknown;
                try {
                    params = JSON.parse(call.arguments);
                } catch {
                    throw new ChatHistoryError(`messages[${index}].tool_calls[${callIndex}].function.arguments: not JSON`);
                }
                return {id: call.id, item: {type: "functionCall", name: call.name, params, result: ""}};
            });
            const response: ModelResponse = [
                ...message.reasoning !== undefined && message.reasoning !== ""
                    ? [{type: "segment", segmentType: "thought", text: message.reasoning, ended: true} as const] : [],
                ...message.content !== "" ? [message.content] : [], ...unanswered.map(({item}) => item)];
            history.push({type: "model", response});
        } else {
            const byId = unanswered.findIndex((call) => call.id === message.toolCallId);
            const [call] = unanswered.splice(byId === -1 ? 0 : byId, 1);
            if (call === undefined)
                throw new ChatHistoryError(`messages[${index}]: a tool message must answer a tool call of the assistant message before it`);
            call.item.result = message.content;
        }
    }
    return history;
}
