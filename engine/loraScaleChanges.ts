/**
 * llama-server's `POST /lora-adapters` on the engine: new scales for every LoRA adapter.
 *
 * node-llama-cpp applies adapters to the whole context, so a change must not land under a running request (its tokens
 * would come from two sets of weights): a change waits until no request runs, and no request starts while one waits
 * (the engine asks `holding`). Then the scales go to the context, and every state computed with the old ones is
 * forgotten: what the sequences hold (the prefix cache) and the prompt cache's saved states. Changes that waited
 * together are applied as one, the last one's scales winning, as they would have one after the other.
 *
 * A request may ask for other scales than the server's (GenerateRequest.loraScales, llama-server's per-request `lora`):
 * the engine then switches the context to them once no request runs (`switchTo`), and back for a request that asks for
 * none. The states a switch leaves are kept, marked with the scales they were computed with (`scalesKey`): only a
 * request asking for the same scales reuses them.
 */
import type {EngineToHost, HostToEngine} from "../protocol/engineMessages.js";
import type {LoraAdapter} from "../protocol/loraAdapters.js";
import {errorMessage} from "../common/errorMessage.js";
import type {LlamaContext} from "./llamaTypes.js";
import {soloDecodeOf} from "./soloDecode.js";

type SetLoraScales = Extract<HostToEngine, {type: "setLoraScales"}>;
type Done = Extract<EngineToHost, {type: "loraScalesSet"}>;

/** node-llama-cpp 3.21.1's way to set a context's adapters (the one its `createContext({lora})` takes). */
type ContextLoras = {_setLoras(loras: Array<{filePath: string, scale: number}>): Promise<void>};

/**
 * Sets the context's adapters. No request runs then, but a request that ended on a stop string may have had its next
 * token decoded ahead (engine.ts `decodesAhead`), still in flight: where the solo decode shares node-llama-cpp's context
 * lock, the change waits for it under that lock; the decode's token is never used.
 */
async function setContextLoras(context: LlamaContext, adapters: readonly LoraAdapter[]): Promise<void> {
    const internals = context as unknown as Partial<ContextLoras> & {_ctx?: object};
    const setLoras = internals._setLoras;
    if (typeof setLoras !== "function")
        throw new Error("this node-llama-cpp cannot change a context's LoRA adapters");
    const set = (): Promise<void> => setLoras.call(context, adapters.map(({path, scale}) => ({filePath: path, scale})));
    const solo = internals._ctx === undefined ? undefined : soloDecodeOf(internals._ctx);
    await (solo !== undefined ? solo.exclusive(set) : set());
}

/** The scales states were computed with, as a key: requests reuse only states with their own. */
export function scalesKey(scales: readonly number[]): string {
    return scales.join(",");
}

export class LoraScaleChanges {
    private pending: SetLoraScales[] = [];
    private applying = false;
    /** The scales the context holds now (`scalesKey`); undefined after a failed change: unknown, set again before any request. */
    private appliedKey: string | undefined;

    constructor(private adapters: readonly LoraAdapter[], private readonly options: {
        context: LlamaContext,
        reply: (done: Done) => void,
        /** Forgets every state computed with the old scales: the sequences' tokens and the prompt cache's saved states. */
        forgetCachedStates: () => Promise<void>
    }) {
        this.appliedKey = scalesKey(this.defaultScales);
    }

    /** The server's scales (`POST /lora-adapters` changes them): a request that asks for none runs with these. */
    get defaultScales(): number[] {
        return this.adapters.map((adapter) => adapter.scale);
    }

    /** The key of the scales the context holds now; undefined: unknown (a change failed part way). */
    get applied(): string | undefined {
        return this.appliedKey;
    }

    /** Puts `scales` (one per adapter) on the context; call only while no request runs. Throws if node-llama-cpp could not. */
    async switchTo(scales: readonly number[]): Promise<void> {
        this.appliedKey = undefined;
        await setContextLoras(this.options.context, this.adapters.map((adapter, id) => ({path: adapter.path, scale: scales[id]!})));
        this.appliedKey = scalesKey(scales);
    }

    /** Whether a change waits or is being applied: no request may start meanwhile. */
    get holding(): boolean {
        return this.pending.length > 0 || this.applying;
    }

    /** Whether a change waits and none is being applied: `apply` has work. */
    get ready(): boolean {
        return this.pending.length > 0 && !this.applying;
    }

    /** Queues a change; one with the wrong number of scales is answered at once with why. */
    submit(message: SetLoraScales): void {
        if (message.scales.length !== this.adapters.length) {
            this.options.reply({type: "loraScalesSet", seq: message.seq, adapters: [...this.adapters],
                error: `expected ${this.adapters.length} scale${this.adapters.length === 1 ? "" : "s"} (one per adapter), got ${message.scales.length}`});
            return;
        }
        // The scales already in force, with nothing else waiting: nothing to wait for or forget.
        if (!this.holding && message.scales.every((scale, id) => scale === this.adapters[id]!.scale)) {
            this.options.reply({type: "loraScalesSet", seq: message.seq, adapters: [...this.adapters]});
            return;
        }
        this.pending.push(message);
    }

    /** Applies the waiting changes; call only while no request runs. Every change is answered, with the scales now in force. */
    async apply(): Promise<void> {
        if (!this.ready)
            return;
        this.applying = true;
        const changes = this.pending;
        this.pending = [];
        const scales = changes.at(-1)!.scales;
        const next = this.adapters.map((adapter, id) => ({path: adapter.path, scale: scales[id]!}));
        let error: string | undefined;
        this.appliedKey = undefined;
        try {
            await setContextLoras(this.options.context, next);
            this.adapters = next;
            this.appliedKey = scalesKey(this.defaultScales);
        } catch (cause) {
            error = `could not set the LoRA scales: ${errorMessage(cause)}`;
        }
        try {
            // Also after a failure: the context may hold some of the new scales.
            await this.options.forgetCachedStates();
        } finally {
            this.applying = false;
        }
        for (const change of changes)
            this.options.reply({type: "loraScalesSet", seq: change.seq, adapters: [...this.adapters], ...error !== undefined ? {error} : {}});
    }
}
