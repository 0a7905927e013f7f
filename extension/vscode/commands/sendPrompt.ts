import * as vscode from "vscode";
import type {EngineController} from "../engineController.js";

/**
 * "Send Prompt…": asks for a prompt and streams the completion into a new untitled editor. The
 * request goes through the same EngineClient as everything else, so the panel shows it.
 */
export async function sendPrompt(controller: EngineController, log: vscode.LogOutputChannel): Promise<void> {
    const client = controller.engine;
    if (client === undefined || client.state !== "ready") {
        void vscode.window.showWarningMessage("Inference Monitor: start a model first.", "Start Model…").then((action) => {
            if (action !== undefined)
                void vscode.commands.executeCommand("inferenceMonitor.startModel");
        });
        return;
    }
    const prompt = await vscode.window.showInputBox({
        title: "Inference Monitor: Send Prompt",
        prompt: "The prompt to complete (the reply streams into a new editor)",
        value: "Once upon a time",
        ignoreFocusOut: true
    });
    if (prompt === undefined || prompt.trim() === "")
        return;
    const document = await vscode.workspace.openTextDocument({content: prompt, language: "markdown"});
    await vscode.window.showTextDocument(document, {preview: false});
    const handle = client.generate({prompt, maxTokens: 256, temperature: 0.8, client: "send-prompt"});
    let pending = "";
    let writing: Promise<unknown> = Promise.resolve();
    const flush = () => {
        if (pending === "")
            return;
        const text = pending;
        pending = "";
        // A WorkspaceEdit works whether or not the document's editor is visible (the panel may cover it).
        writing = writing.then(() => {
            if (document.isClosed)
                return;
            const edit = new vscode.WorkspaceEdit();
            edit.insert(document.uri, document.positionAt(document.getText().length), text);
            return vscode.workspace.applyEdit(edit);
        });
    };
    const timer = setInterval(flush, 50);
    const closed = vscode.workspace.onDidCloseTextDocument((closedDocument) => {
        if (closedDocument === document)
            handle.cancel();
    });
    try {
        for await (const chunk of handle)
            pending += chunk.text;
        const result = await handle.done;
        flush();
        await writing;
        const ttft = result.metrics.ttftS !== undefined ? `, TTFT ${(result.metrics.ttftS * 1000).toFixed(0)} ms` : "";
        const summary = `request ${result.id}: ${result.reason}, ${result.promptTokens} prompt + ${result.generatedTokens} generated tokens${ttft}`;
        log.info(summary);
        if (result.reason === "error")
            void vscode.window.showErrorMessage(`Inference Monitor: the request failed: ${result.error ?? "unknown error"}`);
        else
            vscode.window.setStatusBarMessage(`$(check) ${summary}`, 5000);
    } finally {
        clearInterval(timer);
        closed.dispose();
    }
}
