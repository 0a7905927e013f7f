import fs from "node:fs/promises";
import * as vscode from "vscode";
import {exportStats as renderExport} from "../../host/stats/statsExport.js";
import type {EngineController} from "../engineController.js";

/** "Export Stats…": the full snapshot with every request's lifecycle as JSON, or the time series as CSV. */
export async function exportStats(controller: EngineController, format?: "json" | "csv"): Promise<void> {
    const chosen = format ?? (await vscode.window.showQuickPick([
        {label: "JSON", description: "full snapshot and per-request lifecycles", format: "json" as const},
        {label: "CSV", description: "time series (one row per sample)", format: "csv" as const}
    ], {title: "Inference Monitor: Export Stats"}))?.format;
    if (chosen === undefined)
        return;
    const exported = renderExport(controller.stats.snapshot(), chosen);
    const defaultUri = vscode.Uri.joinPath(vscode.workspace.workspaceFolders?.[0]?.uri ?? vscode.Uri.file(process.cwd()), exported.fileName);
    const target = await vscode.window.showSaveDialog({defaultUri, filters: chosen === "json" ? {JSON: ["json"]} : {CSV: ["csv"]}});
    if (target === undefined)
        return;
    await fs.writeFile(target.fsPath, exported.content);
    void vscode.window.showInformationMessage(`Inference Monitor: stats exported to ${target.fsPath}`);
}
