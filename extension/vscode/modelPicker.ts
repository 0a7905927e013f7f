import path from "node:path";
import * as vscode from "vscode";
import {downloadModel, isDownloadableModelUri} from "../host/models/modelDownload.js";
import {errorMessage} from "../../common/errorMessage.js";
import {formatBytes} from "../../common/format.js";

/** A model choice: a file, or the built-in demo model (`path` undefined). */
export type ModelChoice = {path: string | undefined, label: string};

const recentKey = "inferenceMonitor.recentModels";
const maxRecent = 8;

export function rememberModel(state: vscode.Memento, modelPath: string): Thenable<void> {
    const recent = state.get<string[]>(recentKey, []).filter((p) => p !== modelPath);
    return state.update(recentKey, [modelPath, ...recent].slice(0, maxRecent));
}

type PickItem = vscode.QuickPickItem & {action: "demo" | "open" | "download" | "recent", path?: string};

/**
 * Asks which model to start: the built-in demo model, a .gguf file, a recent model, or a Hugging
 * Face download (through node-llama-cpp's downloader, with cancellable progress).
 * Resolves undefined when the user cancels.
 */
export async function pickModel(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): Promise<ModelChoice | undefined> {
    const recent = context.globalState.get<string[]>(recentKey, []);
    const items: PickItem[] = [
        {label: "$(beaker) Built-in demo model", description: "~20 M params, random weights, generated locally", action: "demo"},
        {label: "$(file) Open a GGUF file…", action: "open"},
        {label: "$(cloud-download) Download from Hugging Face…", description: "hf:user/repo:quant or a URL", action: "download"}
    ];
    if (recent.length > 0) {
        items.push({label: "Recent", kind: vscode.QuickPickItemKind.Separator, action: "recent"});
        for (const file of recent)
            items.push({label: `$(history) ${path.basename(file)}`, description: path.dirname(file), action: "recent", path: file});
    }
    const picked = await vscode.window.showQuickPick(items, {title: "Inference Monitor: Start Model", placeHolder: "Which model should the engine serve?",
        ignoreFocusOut: true});
    if (picked === undefined)
        return undefined;
    switch (picked.action) {
        case "demo": return {path: undefined, label: "built-in demo model"};
        case "recent": return {path: picked.path!, label: path.basename(picked.path!)};
        case "open": {
            const files = await vscode.window.showOpenDialog({canSelectMany: false, openLabel: "Start Model", filters: {"GGUF models": ["gguf"]}});
            const file = files?.[0]?.fsPath;
            return file === undefined ? undefined : {path: file, label: path.basename(file)};
        }
        case "download": return await downloadFromHub(context, log);
    }
}

async function downloadFromHub(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): Promise<ModelChoice | undefined> {
    const uri = await vscode.window.showInputBox({
        title: "Download a GGUF model",
        prompt: "A Hugging Face model (hf:user/repo:quant, e.g. hf:bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M) or an https:// URL",
        ignoreFocusOut: true,
        validateInput: (value) => isDownloadableModelUri(value.trim()) ? undefined : "Expected hf:user/repo:quant or an https:// URL"
    });
    if (uri === undefined)
        return undefined;
    const dir = path.join(context.globalStorageUri.fsPath, "models");
    const file = await vscode.window.withProgress({
        location: vscode.ProgressLocation.Notification, title: `Downloading ${uri.trim()}`, cancellable: true
    }, async (progress, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        let reported = 0;
        try {
            return await downloadModel(uri.trim(), dir, {
                signal: abort.signal,
                onProgress: ({downloadedBytes, totalBytes}) => {
                    if (totalBytes <= 0)
                        return;
                    const percent = (downloadedBytes / totalBytes) * 100;
                    const message = `${formatBytes(downloadedBytes)} / ${formatBytes(totalBytes)}`;
                    progress.report({increment: percent - reported, message});
                    reported = percent;
                }
            });
        } catch (error) {
            if (token.isCancellationRequested)
                return undefined;
            const message = errorMessage(error);
            log.error(`Download of ${uri} failed: ${message}`);
            void vscode.window.showErrorMessage(`Could not download ${uri}: ${message}`);
            return undefined;
        }
    });
    return file === undefined ? undefined : {path: file, label: path.basename(file)};
}
