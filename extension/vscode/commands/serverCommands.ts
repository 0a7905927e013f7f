/**
 * "Attach to Server…", "Detach from Server…" and "Show Stats For…": the servers the panel watches
 * (ServerWatch), chosen the way a user finds them — the usual local ports probed and named, or a URL.
 */
import * as vscode from "vscode";
import {errorMessage} from "../../../common/errorMessage.js";
import {targetKindNames} from "../../../protocol/targetView.js";
import {probeTarget, wellKnownLocalServers} from "../../host/targets/probeTarget.js";
import {TargetReadError} from "../../host/targets/targetHttp.js";
import type {ServerWatch} from "../serverWatch.js";
import {readSettings} from "../settings.js";


type ServerItem = vscode.QuickPickItem & {url?: string};

/**
 * A server's base URL, as the user finds it: the usual local ports probed and named (with the attached
 * servers marked), or typed. Undefined when cancelled.
 */
export async function pickServerUrl(title: string): Promise<string | undefined> {
    const targets = readSettings().targets;
    const attached = new Set(targets.map((target) => target.url));
    const pick = vscode.window.createQuickPick<ServerItem>();
    pick.title = title;
    // It fills in while ports are probed: a focus change meanwhile (a notification, the panel) must not dismiss it.
    pick.ignoreFocusOut = true;
    pick.placeholder = "Looking for servers on the usual local ports…";
    pick.busy = true;
    const enter: ServerItem = {label: "$(link) Enter a URL…", detail: "llama.cpp's llama-server, vLLM, Ollama — on this machine or another"};
    const known: ServerItem[] = targets.map((target) => ({label: `$(server) ${target.name ?? target.url}`, description: "attached", url: target.url}));
    pick.items = [...known, enter];
    const found: ServerItem[] = [];
    void Promise.all(wellKnownLocalServers.map(async ({port, name}) => {
        const url = `http://127.0.0.1:${port}`;
        if (attached.has(url))
            return;
        try {
            const kind = await probeTarget(url, {timeoutMs: 800});
            found.push({label: `$(server) ${targetKindNames[kind]} at ${url}`, description: `port ${port} (${name}'s default)`, url});
        } catch (error) {
            // nothing there; a server that answers only the OpenAI API can still be proxied
            if (error instanceof TargetReadError && error.kind === "bad" && /\/v1\/models only/.test(error.message))
                found.push({label: `$(server) OpenAI-compatible server at ${url}`, description: `port ${port} (${name}'s default)`, url});
        }
    })).then(() => {
        pick.busy = false;
        pick.placeholder = found.length + known.length > 0 ? "Pick a server, or enter its URL"
            : "No server on the usual ports (11434, 8080, 1234, 8000): enter its URL";
        pick.items = [...known, ...found.sort((a, b) => a.label.localeCompare(b.label)), enter];
    });
    pick.show();
    const chosen = await new Promise<ServerItem | undefined>((resolve) => {
        pick.onDidAccept(() => resolve(pick.selectedItems[0]));
        pick.onDidHide(() => resolve(undefined));
    });
    pick.dispose();
    if (chosen === undefined)
        return undefined;
    if (chosen.url !== undefined)
        return chosen.url;
    const typed = await vscode.window.showInputBox({
        title, prompt: "The server's base URL", placeHolder: "http://127.0.0.1:8080", ignoreFocusOut: true,
        validateInput: (value) => {
            try {
                const parsed = new URL(value.trim());
                return parsed.protocol === "http:" || parsed.protocol === "https:" ? undefined : "an http:// or https:// URL";
            } catch {
                return "an http:// or https:// URL";
            }
        }
    });
    return typed === undefined ? undefined : new URL(typed.trim()).href.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/** Probes the usual local ports and offers what answers, the attached servers, and "Enter a URL…"; watches the one picked. */
export async function attachServer(watch: ServerWatch, log: vscode.LogOutputChannel): Promise<boolean> {
    const url = await pickServerUrl("Inference Monitor: Attach to Server");
    if (url === undefined)
        return false;
    let apiKey: string | undefined;
    for (;;) {
        try {
            const kind = await probeTarget(url, {timeoutMs: 3000, ...(apiKey !== undefined ? {apiKey} : {})});
            await watch.attach({url}, apiKey);
            log.info(`Attached to ${targetKindNames[kind]} at ${url}`);
            void vscode.window.showInformationMessage(`Inference Monitor: watching ${targetKindNames[kind]} at ${url}.`);
            return true;
        } catch (error) {
            if (error instanceof TargetReadError && error.kind === "auth") {
                apiKey = await vscode.window.showInputBox({
                    title: "Inference Monitor: Attach to Server", prompt: `${url} wants an API key (kept in VS Code's secret storage)`,
                    password: true, ignoreFocusOut: true
                });
                if (apiKey === undefined || apiKey.trim() === "")
                    return false;
                apiKey = apiKey.trim();
                continue;
            }
            throw new Error(`cannot watch ${url}: ${errorMessage(error)}`, {cause: error});
        }
    }
}

/** Removes servers the panel watches (and their stored keys). */
export async function detachServers(watch: ServerWatch): Promise<void> {
    const targets = readSettings().targets;
    if (targets.length === 0) {
        void vscode.window.showInformationMessage("Inference Monitor: no server is attached.");
        return;
    }
    const chosen = await vscode.window.showQuickPick(targets.map((target) => ({label: target.name ?? target.url, url: target.url})),
        {title: "Inference Monitor: Detach from Server", canPickMany: true, placeHolder: "The servers to stop watching", ignoreFocusOut: true});
    if (chosen === undefined || chosen.length === 0)
        return;
    await watch.detach(chosen.map((item) => item.url));
}

/** Switches what the stats panel and the status bar show: the local engine, a server, or the servers merged. */
export async function showStatsFor(watch: ServerWatch): Promise<boolean> {
    const current = watch.selected?.key;
    const items: Array<vscode.QuickPickItem & {key: string | undefined}> = [
        {label: "$(vm) Local engine", key: undefined, ...(current === undefined ? {description: "shown now"} : {})},
        ...watch.sources.map((source) => ({label: `$(server) ${source.label}`, key: source.key,
            ...(current === source.key ? {description: "shown now"} : {})}))
    ];
    if (watch.sources.length === 0)
        items.push({label: "$(add) Attach to Server…", key: "attach"});
    const chosen = await vscode.window.showQuickPick(items, {title: "Inference Monitor: Show Stats For", ignoreFocusOut: true});
    if (chosen === undefined)
        return false;
    if (chosen.key === "attach")
        return await vscode.commands.executeCommand<boolean>("inferenceMonitor.attachServer") === true;
    watch.select(chosen.key);
    return true;
}
