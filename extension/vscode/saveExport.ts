import fs from "node:fs/promises";
import os from "node:os";
import * as vscode from "vscode";
import type {ExportFormat, ExportResultParams} from "../../protocol/panelMessages.js";
import type {StatsSnapshotView} from "../../protocol/statsView.js";
import {errorMessage} from "../../common/errorMessage.js";
import {exportStats} from "../host/stats/statsExport.js";

export type SaveExportOutcome = {kind: "saved", result: ExportResultParams} | {kind: "cancelled"} | {kind: "failed", message: string};

const filters: Record<ExportFormat, Record<string, string[]>> = {json: {JSON: ["json"]}, csv: {CSV: ["csv"]}};

/**
 * Saves a stats export where the user picks, for both "Export Stats…" and the panel's Export buttons:
 * JSON = the full snapshot, CSV = the time series (statsExport.ts); the dialog opens in the first
 * workspace folder (else the home folder) on the export's file name. Tells the user how it went (a
 * notification and the log) and never throws.
 */
export async function saveStatsExport(snapshot: StatsSnapshotView, format: ExportFormat,
                                      log: vscode.LogOutputChannel): Promise<SaveExportOutcome> {
    const exported = exportStats(snapshot, format);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri ?? vscode.Uri.file(os.homedir());
    const target = await vscode.window.showSaveDialog({
        defaultUri: vscode.Uri.joinPath(folder, exported.fileName),
        filters: filters[format],
        title: "Inference Monitor: Export Stats",
        saveLabel: "Export"
    });
    if (target === undefined)
        return {kind: "cancelled"};
    try {
        await fs.writeFile(target.fsPath, exported.content);
    } catch (error) {
        const message = `could not save the stats export to ${target.fsPath}: ${errorMessage(error)}`;
        log.error(message);
        void vscode.window.showErrorMessage(`Inference Monitor: ${message}`);
        return {kind: "failed", message};
    }
    log.info(`Stats exported to ${target.fsPath}`);
    void vscode.window.showInformationMessage(`Inference Monitor: stats exported to ${target.fsPath}`);
    return {kind: "saved", result: {format, fileName: exported.fileName, mimeType: exported.mimeType, savedTo: target.fsPath}};
}
