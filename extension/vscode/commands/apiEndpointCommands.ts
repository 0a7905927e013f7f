import * as vscode from "vscode";
import type {ApiEndpoint} from "../apiEndpoint.js";

/** "Copy API Endpoint": copies the base URL (`http://127.0.0.1:PORT/v1`); offers the key when one is set. */
export async function copyApiEndpoint(endpoint: ApiEndpoint): Promise<void> {
    const url = endpoint.baseUrl;
    if (url === undefined) {
        void vscode.window.showWarningMessage(`Inference Monitor: ${endpoint.whyNotServing()}`);
        return;
    }
    await vscode.env.clipboard.writeText(url);
    // The same port serves Ollama's API (Copilot Chat's Ollama models, Open WebUI, Continue's "ollama" provider).
    const ollama = `Ollama clients: ${url.replace(/\/v1$/, "")}`;
    const key = await endpoint.apiKey();
    if (key === undefined) {
        void vscode.window.showInformationMessage(`Inference Monitor: copied ${url} (OpenAI-compatible API; any API key works). ${ollama}.`);
        return;
    }
    const action = await vscode.window.showInformationMessage(
        `Inference Monitor: copied ${url} (OpenAI-compatible API; requests need the API key). ${ollama}.`, "Copy API Key");
    if (action === "Copy API Key") {
        await vscode.env.clipboard.writeText(key);
        void vscode.window.showInformationMessage("Inference Monitor: copied the API key.");
    }
}

/** "Set API Key…": the key clients must send, kept in SecretStorage; empty removes it. The server restarts with it. */
export async function setApiKey(endpoint: ApiEndpoint): Promise<void> {
    const had = await endpoint.hasApiKey();
    const key = await vscode.window.showInputBox({
        title: "Inference Monitor: Set API Key",
        prompt: had
            ? "A new key for the OpenAI-compatible API (Authorization: Bearer KEY); empty removes the key"
            : "The key clients must send to the OpenAI-compatible API (Authorization: Bearer KEY); empty = no key",
        password: true,
        ignoreFocusOut: true
    });
    if (key === undefined)
        return;
    const trimmed = key.trim();
    await endpoint.setApiKey(trimmed);
    void vscode.window.showInformationMessage(trimmed === ""
        ? `Inference Monitor: ${had ? "API key removed; " : ""}the OpenAI-compatible API accepts any key.`
        : "Inference Monitor: API key set (stored in VS Code's secret storage); the OpenAI-compatible API now requires it.");
}
