/**
 * One Responses API answer as it is built: the response object's fixed fields (echoing the request), its output
 * items as the engine's output arrives — a reasoning item, the assistant message, then the function calls, in the
 * order the model wrote them — and the final status and usage.
 */
import {randomBytes} from "node:crypto";
import type {
    FunctionCallItem, MessageItem, OutputItem, ReasoningItem, ResponseObject, ResponseStatus, ResponseUsage
} from "../../../protocol/openaiResponseObjects.js";
import type {ResponsesRequest} from "../../../protocol/openaiResponses.js";
import type {RequestResult} from "../engineClient/requestState.js";
import {newToolCallId} from "../chat/toolCallId.js";

const itemId = (prefix: string): string => `${prefix}_${randomBytes(12).toString("hex")}`;

export class ResponseBuilder {
    readonly id: string;
    readonly output: OutputItem[] = [];
    private readonly createdAt = Math.floor(Date.now() / 1000);
    private reasoningItem: ReasoningItem | undefined;
    private messageItem: MessageItem | undefined;
    private status: ResponseStatus = "in_progress";
    private completedAt: number | null = null;
    private usage: ResponseUsage | null = null;
    private error: ResponseObject["error"] = null;

    constructor(engineRequestId: string, private readonly model: string, private readonly request: ResponsesRequest) {
        this.id = `resp_${engineRequestId.replaceAll("-", "")}`;
    }

    /** The reasoning item, created (as the next output item) on the first reasoning text. */
    reasoning(): {item: ReasoningItem, index: number, created: boolean} {
        const created = this.reasoningItem === undefined;
        this.reasoningItem ??= this.add({type: "reasoning", id: itemId("rs"), summary: [], content: [{type: "reasoning_text", text: ""}],
            status: "in_progress"});
        return {item: this.reasoningItem, index: this.output.indexOf(this.reasoningItem), created};
    }

    /** The assistant message, created (as the next output item) on the first answer text; the reasoning before it is complete. */
    message(): {item: MessageItem, index: number, created: boolean} {
        const created = this.messageItem === undefined;
        if (created && this.reasoningItem !== undefined)
            this.reasoningItem.status = "completed";
        this.messageItem ??= this.add({type: "message", id: itemId("msg"), role: "assistant", status: "in_progress",
            content: [{type: "output_text", text: "", annotations: []}]});
        return {item: this.messageItem, index: this.output.indexOf(this.messageItem), created};
    }

    functionCall(name: string, args: string): {item: FunctionCallItem, index: number} {
        const namespace = this.request.namespaces?.[name];
        const item = this.add<FunctionCallItem>({type: "function_call", id: itemId("fc"), call_id: newToolCallId(), name, arguments: args,
            status: "completed", ...namespace !== undefined ? {namespace} : {}});
        return {item, index: this.output.length - 1};
    }

    /** The engine's final result: the calls as items, every open item closed, the status and usage. */
    finish(result: RequestResult): FunctionCallItem[] {
        const incomplete = result.reason === "length";
        for (const item of [this.reasoningItem, this.messageItem])
            if (item?.status === "in_progress")
                item.status = incomplete ? "incomplete" : "completed";
        const calls = (result.toolCalls ?? []).map((call) => this.functionCall(call.name, call.arguments).item);
        this.status = incomplete ? "incomplete" : "completed";
        this.completedAt = Math.floor(Date.now() / 1000);
        const {promptTokens, cachedTokens, generatedTokens} = result;
        this.usage = {input_tokens: promptTokens, input_tokens_details: {cached_tokens: cachedTokens}, output_tokens: generatedTokens,
            output_tokens_details: {reasoning_tokens: result.reasoning?.tokens ?? 0}, total_tokens: promptTokens + generatedTokens};
        return calls;
    }

    /** A response that failed after it started (streamed). */
    fail(message: string): void {
        this.status = "failed";
        this.error = {code: "server_error", message};
    }

    snapshot(): ResponseObject {
        const {echo, temperature, topP, maxOutputTokens} = this.request;
        const outputText = this.messageItem?.content.map((part) => part.text).join("") ?? "";
        return {
            id: this.id, object: "response", created_at: this.createdAt, status: this.status, completed_at: this.completedAt,
            error: this.error, incomplete_details: this.status === "incomplete" ? {reason: "max_output_tokens"} : null,
            instructions: echo.instructions, metadata: echo.metadata, model: this.model, output: structuredClone(this.output),
            output_text: outputText, parallel_tool_calls: echo.parallelToolCalls, temperature: temperature ?? null, top_p: topP ?? null,
            max_output_tokens: maxOutputTokens ?? null, tool_choice: echo.toolChoice, tools: echo.tools, text: echo.text,
            reasoning: echo.reasoning, store: false, usage: this.usage
        };
    }

    private add<T extends OutputItem>(item: T): T {
        this.output.push(item);
        return item;
    }
}
