import * as vscode from "vscode";
import {computeBenchMetrics, formatBenchTable} from "../../host/bench/benchMetrics.js";
import {runWorkload, type Workload} from "../../host/bench/runBenchmark.js";
import type {EngineController} from "../engineController.js";
import {formatNumber, formatTokensPerS} from "../../../common/format.js";

type Preset = vscode.QuickPickItem & {workload: Workload};

const presets: Preset[] = [
    {label: "Quick", description: "20 prompts · 64 in / 32 out · all at once", workload: {numPrompts: 20, inputLen: 64, outputLen: 32, maxConcurrency: Infinity, requestRate: Infinity, seed: 0}},
    {label: "Standard", description: "100 prompts · 128 in / 64 out · 4 req/s Poisson", workload: {numPrompts: 100, inputLen: 128, outputLen: 64, maxConcurrency: Infinity, requestRate: 4, seed: 0}},
    {label: "Sustained", description: "300 prompts · 64 in / 128 out · max concurrency 8", workload: {numPrompts: 300, inputLen: 64, outputLen: 128, maxConcurrency: 8, requestRate: Infinity, seed: 0}}
];

/**
 * "Run Benchmark…": runs vLLM's serving-benchmark workload against the running engine, with a
 * cancellable progress notification; the panel shows it live and the table goes to the log.
 */
export async function runBenchmark(controller: EngineController, log: vscode.LogOutputChannel): Promise<void> {
    const client = controller.engine;
    if (client === undefined || client.state !== "ready") {
        void vscode.window.showWarningMessage("Inference Monitor: start a model first.");
        return;
    }
    // A focus change while it is open (a notification, the live panel) must not dismiss it; Escape does.
    const preset = await vscode.window.showQuickPick(presets, {title: "Inference Monitor: Run Benchmark", placeHolder: "Which workload?",
        ignoreFocusOut: true});
    if (preset === undefined)
        return;
    const workload = preset.workload;
    await vscode.commands.executeCommand("inferenceMonitor.showStats");
    const outcome = await vscode.window.withProgress({
        location: vscode.ProgressLocation.Notification, title: `Benchmark (${preset.label})`, cancellable: true
    }, async (progress, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        let reported = 0;
        const run = await runWorkload(client, workload, (done) => {
            const percent = (done / workload.numPrompts) * 100;
            progress.report({increment: percent - reported, message: `${done}/${workload.numPrompts} requests`});
            reported = percent;
        }, abort.signal);
        return {...run, cancelled: abort.signal.aborted};
    });
    const metrics = computeBenchMetrics(outcome.results, outcome.durationS);
    log.info(`Benchmark ${preset.label}${outcome.cancelled ? " (cancelled)" : ""}:\n${formatBenchTable(metrics)}`);
    const summary = `${metrics.completed} requests, ${formatTokensPerS(metrics.output_throughput)} output, ` +
        `median TTFT ${formatNumber(metrics.median_ttft_ms)} ms, median ITL ${formatNumber(metrics.median_itl_ms)} ms`;
    const action = await vscode.window.showInformationMessage(`Benchmark ${outcome.cancelled ? "cancelled" : "done"}: ${summary}`, "Show Table");
    if (action === "Show Table")
        log.show(true);
}
