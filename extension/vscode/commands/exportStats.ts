import * as vscode from "vscode";
import type {EngineController} from "../engineController.js";
import {saveStatsExport} from "../saveExport.js";

/** "Export Stats…": the full snapshot with every request's lifecycle as JSON, or the time series as CSV. */
export async function exportStats(controller: EngineController, log: vscode.LogOutputChannel, format?: "json" | "csv"): Promise<void> {
    const chosen = format ?? (await vscode.window.showQuickPick([
        {label: "JSON", description: "full snapshot and per-request lifecycles", format: "json" as const},
        {label: "CSV", description: "time series (one row per sample)", format: "csv" as const}
    ], {title: "Inference Monitor: Export Stats", ignoreFocusOut: true}))?.format;
    if (chosen === undefined)
        return;
    await saveStatsExport(controller.stats.snapshot(), chosen, log);
}
