/**
 * Counters the engine's main thread writes and the stats worker reads, in one SharedArrayBuffer.
 * Writes are single Atomics stores (a few ns) so the engine's token loop pays next to nothing, and the
 * worker can read them while the main thread is blocked.
 */

/** Slots in the shared Int32Array. Times are ms relative to `baseEpochMs` (fits 24 days). */
export const enum CounterSlot {
    running = 0,
    waiting,
    promptTokensTotal,
    generationTokensTotal,
    stepsTotal,
    lastStepMs,
    kvUsedTokens,
    kvCapacityTokens,
    /** VRAM in MiB so it fits an Int32. */
    vramUsedMiB,
    vramTotalMiB,
    slotCount
}

export type SharedCountersHandle = {buffer: SharedArrayBuffer, baseEpochMs: number};

export class SharedCounters {
    readonly handle: SharedCountersHandle;
    private readonly slots: Int32Array;

    constructor(handle?: SharedCountersHandle) {
        this.handle = handle ?? {
            buffer: new SharedArrayBuffer(CounterSlot.slotCount * Int32Array.BYTES_PER_ELEMENT),
            baseEpochMs: Date.now()
        };
        this.slots = new Int32Array(this.handle.buffer);
    }

    set(slot: CounterSlot, value: number): void {
        Atomics.store(this.slots, slot, value);
    }

    add(slot: CounterSlot, delta: number): void {
        Atomics.add(this.slots, slot, delta);
    }

    get(slot: CounterSlot): number {
        return Atomics.load(this.slots, slot);
    }

    markStep(nowEpochMs: number): void {
        Atomics.store(this.slots, CounterSlot.lastStepMs, Math.round(nowEpochMs - this.handle.baseEpochMs));
        Atomics.add(this.slots, CounterSlot.stepsTotal, 1);
    }

    /** Restart the step clock when work starts after idling, so idle time is not reported as a stall. */
    restartStepClock(nowEpochMs: number): void {
        Atomics.store(this.slots, CounterSlot.lastStepMs, Math.round(nowEpochMs - this.handle.baseEpochMs));
    }

    /** ms since the last step while requests run; 0 when idle (an idle engine is not stalled). */
    msSinceLastStep(nowEpochMs: number): number {
        if (this.get(CounterSlot.running) === 0)
            return 0;
        return Math.max(0, nowEpochMs - this.handle.baseEpochMs - this.get(CounterSlot.lastStepMs));
    }
}
