/**
 * The running local model inside VS Code's own AI (issue H): a Language Model Chat Provider (vendor
 * `inference-monitor`), so it is in the chat model picker and in `vscode.lm.selectChatModels(...)` for
 * every extension. Each request runs on the Engine like the OpenAI endpoint's (the same request
 * building, `extension/host/chat/`), labelled with client `vscode.lm`, so it shows in the panel.
 */
import * as vscode from "vscode";
import {generationInput} from "../host/chat/generationInput.js";
import {newToolCallId} from "../host/chat/toolCallId.js";
import {servedModelId} from "../host/servedModelId.js";
import {textOf, toChatMessages, toToolCallPart, toToolDefinitions} from "./chatMessages.js";
import type {EngineController} from "./engineController.js";

export const chatVendor = "inference-monitor";
/** The client label of requests made through VS Code's language model API. */
export const vscodeLmClient = "vscode.lm";

export class LocalChatModelProvider implements vscode.LanguageModelChatProvider, vscode.Disposable {
    private readonly changeEmitter = new vscode.EventEmitter<void>();
    readonly onDidChangeLanguageModelChatInformation = this.changeEmitter.event;
    private readonly subscription: vscode.Disposable;
    private shownId: string | undefined;

    constructor(private readonly controller: EngineController, private readonly log: vscode.LogOutputChannel) {
        // A model started, stopped or swapped: tell VS Code to ask again.
        this.subscription = controller.onDidChange(() => {
            const id = this.currentInformation()?.id;
            if (id !== this.shownId) {
                this.shownId = id;
                this.changeEmitter.fire();
            }
        });
    }

    dispose(): void {
        this.subscription.dispose();
        this.changeEmitter.dispose();
    }

    provideLanguageModelChatInformation(options: vscode.PrepareLanguageModelChatModelOptions): vscode.LanguageModelChatInformation[] {
        const information = this.currentInformation();
        this.shownId = information?.id;
        if (information !== undefined)
            return [information];
        if (!options.silent)
            void vscode.window.showInformationMessage("Inference Monitor: no local model is running.", "Start Model…").then((action) => {
                if (action === "Start Model…")
                    void vscode.commands.executeCommand("inferenceMonitor.startModel");
            });
        return [];
    }

    async provideLanguageModelChatResponse(
        model: vscode.LanguageModelChatInformation, messages: readonly vscode.LanguageModelChatRequestMessage[],
        options: vscode.ProvideLanguageModelChatResponseOptions, progress: vscode.Progress<vscode.LanguageModelResponsePart>,
        token: vscode.CancellationToken
    ): Promise<void> {
        const client = this.controller.engine;
        const info = client?.info;
        if (client === undefined || info === undefined || client.state !== "ready")
            throw vscode.LanguageModelError.NotFound("no local model is running: run Inference Monitor: Start Model…");
        if (servedModelId(info) !== model.id)
            throw vscode.LanguageModelError.NotFound(`${model.id} is no longer running (now: ${servedModelId(info)})`);
        // modelOptions is free-form (`any` in VS Code's types): read only numbers from it.
        const modelOptions: Readonly<Record<string, unknown>> = options.modelOptions ?? {};
        const maxTokens = modelOptions.max_tokens ?? modelOptions.maxTokens;
        const temperature = modelOptions.temperature;
        // Tools (VS Code's agent mode, other extensions' tools) are offered when the model's template can render them.
        const tools = info.model.toolCalling === true ? toToolDefinitions(options.tools ?? []) : [];
        const handle = client.generate(generationInput({messages: toChatMessages(messages), ...tools.length > 0 ? {tools} : {},
            ...tools.length > 0 && options.toolMode === vscode.LanguageModelChatToolMode.Required ? {toolChoice: "required"} : {}}, {
            ...(typeof maxTokens === "number" ? {maxTokens} : {}),
            ...(typeof temperature === "number" ? {temperature} : {})
        }, info, vscodeLmClient));
        // The engine stops it at its next token (recorded `abort`), also when it was cancelled before it got here.
        const onCancel = () => {
            this.log.info(`vscode.lm request ${handle.id} cancelled by its caller`);
            handle.cancel();
        };
        const cancel = token.onCancellationRequested(onCancel);
        if (token.isCancellationRequested)
            onCancel();
        try {
            for await (const chunk of handle)
                if (chunk.text !== "")
                    progress.report(new vscode.LanguageModelTextPart(chunk.text));
            const result = await handle.done;
            if (result.reason === "error") {
                this.log.warn(`vscode.lm request ${result.id} failed: ${result.error ?? "unknown error"}`);
                throw new vscode.LanguageModelError(`the local model failed: ${result.error ?? "unknown error"}`);
            }
            if (result.reason === "abort" && token.isCancellationRequested)
                throw new vscode.CancellationError();
            for (const call of result.toolCalls ?? [])
                progress.report(toToolCallPart(call, newToolCallId()));
        } finally {
            cancel.dispose();
        }
    }

    async provideTokenCount(_model: vscode.LanguageModelChatInformation,
        text: string | vscode.LanguageModelChatRequestMessage): Promise<number> {
        const client = this.controller.engine;
        if (client === undefined)
            throw vscode.LanguageModelError.NotFound("no local model is running");
        return await client.countTokens(typeof text === "string" ? text : textOf(text.content));
    }

    private currentInformation(): vscode.LanguageModelChatInformation | undefined {
        const client = this.controller.engine;
        const info = client?.info;
        if (client === undefined || info === undefined || client.state !== "ready")
            return undefined;
        // One sequence's cells are what a request may hold: its prompt plus what it generates.
        const perRequest = Math.max(1, Math.floor(info.contextSize / Math.max(1, info.parallel)));
        return {
            id: servedModelId(info),
            name: `${info.model.name} (local)`,
            family: info.model.architecture,
            version: info.model.quantization,
            detail: "Inference Monitor",
            tooltip: `${info.model.path} — ${info.backend.toUpperCase()}, ${info.parallel} sequences`,
            maxInputTokens: perRequest,
            maxOutputTokens: perRequest,
            capabilities: {imageInput: false, toolCalling: info.model.toolCalling === true}
        };
    }
}
