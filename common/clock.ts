/** Epoch milliseconds with sub-millisecond resolution, monotonic within a process. */
export function nowMs(): number {
    return performance.timeOrigin + performance.now();
}
