/**
 * Restarts an engine that crashed, with a growing delay, and gives up after a few crashes close
 * together instead of looping forever (Kubernetes' CrashLoopBackOff, kept short: a local model that
 * crashes three times in a few minutes will crash a fourth). A start that fails counts as a crash,
 * so an engine that dies on start ends the same way. A deliberate start or stop (`reset`) forgets
 * the history and cancels a pending restart.
 */
import {errorMessage} from "../../../common/errorMessage.js";

export type CrashRestartPolicy = {
    /** Automatic restarts allowed within `windowMs`; the next crash gives up. */
    maxRestarts: number,
    windowMs: number,
    /** Delay before the first restart; each further one doubles it. */
    firstDelayMs: number
};

export const defaultCrashRestartPolicy: CrashRestartPolicy = {maxRestarts: 3, windowMs: 5 * 60_000, firstDelayMs: 1000};

export type CrashRestartEvent =
    | {kind: "scheduled", attempt: number, maxRestarts: number, delayMs: number, crash: string}
    | {kind: "restarted", attempt: number}
    /** No more automatic restarts: `crashes` within `windowMs`, the last one described by `crash`. */
    | {kind: "gaveUp", crashes: number, windowMs: number, crash: string};

export type CrashRestarterOptions = {
    /** Starts the engine again; rejects when the start fails. */
    restart: () => Promise<void>,
    onEvent: (event: CrashRestartEvent) => void,
    policy?: CrashRestartPolicy,
    now?: () => number
};

export class CrashRestarter {
    private readonly policy: CrashRestartPolicy;
    private readonly now: () => number;
    /** When each crash in the current run of crashes happened. */
    private crashes: number[] = [];
    private timer: NodeJS.Timeout | undefined;
    /** Bumped by `reset`, so a restart already under way does not report into a new history. */
    private generation = 0;
    private restarting = false;

    constructor(private readonly options: CrashRestarterOptions) {
        this.policy = options.policy ?? defaultCrashRestartPolicy;
        this.now = options.now ?? Date.now;
    }

    /** Whether a restart is scheduled or under way. */
    get pending(): boolean {
        return this.timer !== undefined || this.restarting;
    }

    /** The engine crashed (`crash` says how: exit, signal, the last lines of its log). */
    crashed(crash: string): void {
        const now = this.now();
        this.crashes = [...this.crashes.filter((t) => now - t < this.policy.windowMs), now];
        const restarts = this.crashes.length - 1;
        if (restarts >= this.policy.maxRestarts) {
            this.clearTimer();
            this.options.onEvent({kind: "gaveUp", crashes: this.crashes.length, windowMs: this.policy.windowMs, crash});
            return;
        }
        const attempt = restarts + 1;
        const delayMs = this.policy.firstDelayMs * 2 ** restarts;
        this.options.onEvent({kind: "scheduled", attempt, maxRestarts: this.policy.maxRestarts, delayMs, crash});
        this.clearTimer();
        const generation = this.generation;
        this.timer = setTimeout(() => {
            this.timer = undefined;
            void this.restartNow(attempt, generation);
        }, delayMs);
    }

    /** A deliberate start or stop: forget past crashes and cancel a scheduled restart. */
    reset(): void {
        this.generation++;
        this.crashes = [];
        this.clearTimer();
    }

    dispose(): void {
        this.reset();
    }

    private async restartNow(attempt: number, generation: number): Promise<void> {
        this.restarting = true;
        try {
            await this.options.restart();
            if (generation === this.generation)
                this.options.onEvent({kind: "restarted", attempt});
        } catch (error) {
            if (generation === this.generation)
                this.crashed(`the restart failed: ${errorMessage(error)}`);
        } finally {
            this.restarting = false;
        }
    }

    private clearTimer(): void {
        clearTimeout(this.timer);
        this.timer = undefined;
    }
}
