/**
 * The servers the stats panel watches (`inferenceMonitor.targets`): one StatsManager per server, plus
 * a merged one when there are several, each a source the panel and the status bar can show instead
 * of the local engine (`select`); one TargetMonitor feeds them all, reading each server once a poll.
 * API keys come from SecretStorage. Follows the setting live.
 */
import * as vscode from "vscode";
import {errorMessage} from "../../common/errorMessage.js";
import {StatsManager} from "../host/stats/statsManager.js";
import {TargetMonitor, type WatchedTarget} from "../host/targets/targetMonitor.js";
import {configSection, readSettings, type TargetSetting} from "./settings.js";

/** SecretStorage key of a watched server's API key. */
export function targetSecretKey(url: string): string {
    return `inferenceMonitor.targetApiKey:${url}`;
}

/** One thing the panel can show: a server, all of them merged, or (key undefined) the local engine. */
export type StatsSourceChoice = {key: string, label: string, manager: StatsManager};

export const mergedKey = "merged";

/** A source someone else runs (the monitoring proxy): listed after the watched servers until removed. */
type Extra = StatsSourceChoice & {stop: () => Promise<void>};

export class ServerWatch implements vscode.Disposable {
    private watched: StatsSourceChoice[] = [];
    private monitor: TargetMonitor | undefined;
    private extras: Extra[] = [];
    private selectedKey: string | undefined;
    private readonly changeEmitter = new vscode.EventEmitter<void>();
    /** Sources or the selection changed. */
    readonly onDidChange = this.changeEmitter.event;
    private readonly disposables: vscode.Disposable[] = [];
    private reloading: Promise<void> = Promise.resolve();
    private appliedJson = "[]";

    constructor(private readonly context: vscode.ExtensionContext, private readonly log: vscode.LogOutputChannel) {
        this.disposables.push(this.changeEmitter, vscode.workspace.onDidChangeConfiguration((event) => {
            if (event.affectsConfiguration(`${configSection}.targets`))
                void this.reload();
        }));
        void this.reload();
    }

    /** The servers and their merged view, in the order of the setting (merged first when there are several), then the extras. */
    get sources(): readonly StatsSourceChoice[] {
        return [...this.watched, ...this.extras];
    }

    /** The source the panel shows; undefined = the local engine. */
    get selected(): StatsSourceChoice | undefined {
        return this.sources.find((source) => source.key === this.selectedKey);
    }

    /** Adds a source run elsewhere (replacing one with the same key, which is stopped) and shows it. */
    async addExtra(source: StatsSourceChoice, stop: () => Promise<void>): Promise<void> {
        await this.removeExtra(source.key, false);
        this.extras.push({...source, stop});
        this.select(source.key);
    }

    /** Stops and removes a source added with `addExtra`; false when there is none with that key. */
    async removeExtra(key: string, notify = true): Promise<boolean> {
        const extra = this.extras.find((candidate) => candidate.key === key);
        if (extra === undefined)
            return false;
        this.extras = this.extras.filter((candidate) => candidate !== extra);
        await extra.stop();
        if (this.selectedKey === key)
            this.selectedKey = undefined;
        if (notify)
            this.changeEmitter.fire();
        return true;
    }

    /** The keys of the sources added with `addExtra`. */
    get extraKeys(): string[] {
        return this.extras.map((extra) => extra.key);
    }

    select(key: string | undefined): void {
        this.selectedKey = key;
        this.changeEmitter.fire();
    }

    /** Re-reads the setting and the keys; waits for a reload already running. */
    async reload(): Promise<void> {
        this.reloading = this.reloading.then(() => this.apply(), (error: unknown) => this.log.error(`servers: ${errorMessage(error)}`));
        await this.reloading;
    }

    /** Adds a server to the setting (user settings), shows it, and stores its key when given. */
    async attach(target: TargetSetting, apiKey: string | undefined): Promise<void> {
        if (apiKey !== undefined)
            await this.context.secrets.store(targetSecretKey(target.url), apiKey);
        const targets = readSettings().targets;
        if (!targets.some((existing) => existing.url === target.url))
            await vscode.workspace.getConfiguration(configSection).update("targets", [...targets, target], vscode.ConfigurationTarget.Global);
        await this.reload();
        this.select(this.watched.length > 1 ? mergedKey : target.url);
    }

    /** Removes servers from the setting and forgets their keys. */
    async detach(urls: readonly string[]): Promise<void> {
        for (const url of urls)
            await this.context.secrets.delete(targetSecretKey(url));
        const targets = readSettings().targets.filter((target) => !urls.includes(target.url));
        await vscode.workspace.getConfiguration(configSection).update("targets", targets.length > 0 ? targets : undefined, vscode.ConfigurationTarget.Global);
        await this.reload();
    }

    dispose(): void {
        void this.stopAll();
        for (const extra of this.extras)
            void extra.stop();
        this.extras = [];
        for (const disposable of this.disposables)
            disposable.dispose();
    }

    private async apply(): Promise<void> {
        const targets = readSettings().targets;
        const watched: WatchedTarget[] = await Promise.all(targets.map(async (target) => {
            const apiKey = await this.context.secrets.get(targetSecretKey(target.url));
            return {url: target.url, kind: target.kind ?? "auto", ...(apiKey !== undefined ? {apiKey} : {})};
        }));
        const json = JSON.stringify([targets, watched.map((w) => w.apiKey !== undefined)]);
        if (json === this.appliedJson && this.watched.length > 0)
            return;
        this.appliedJson = json;
        await this.stopAll();
        const next: StatsSourceChoice[] = watched.map((target, i) =>
            ({key: target.url, label: targets[i]!.name ?? target.url, manager: new StatsManager({stallThresholdMs: 3000})}));
        if (next.length > 0) {
            const merged = next.length > 1 ? new StatsManager({stallThresholdMs: 3000}) : undefined;
            this.monitor = new TargetMonitor({
                targets: watched, sink: merged ?? next[0]!.manager,
                ...(merged !== undefined ? {targetSinks: next.map((choice) => choice.manager)} : {})
            });
            this.monitor.start();
            if (merged !== undefined)
                next.unshift({key: mergedKey, label: `All ${watched.length} servers (merged)`, manager: merged});
        }
        this.watched = next;
        if (this.selectedKey !== undefined && !this.sources.some((source) => source.key === this.selectedKey))
            this.selectedKey = undefined;
        if (next.length > 0)
            this.log.info(`Watching ${targets.map((t) => t.url).join(", ")}`);
        this.changeEmitter.fire();
    }

    private async stopAll(): Promise<void> {
        const old = this.watched;
        const monitor = this.monitor;
        this.watched = [];
        this.monitor = undefined;
        await monitor?.stop();
        await Promise.all(old.map(async ({manager}) => await manager.dispose()));
    }
}
