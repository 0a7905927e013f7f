/**
 * Number, size, duration, rate and clock-time formatting for what people read: the stats panel, the
 * status bar, log lines and the CLI. Browser-safe (the panel bundle uses it). Machine-read output
 * (CSV, JSON, vLLM's benchmark table) keeps its own fixed formats.
 */

/** A number with precision by magnitude (3 significant-ish digits); integers as integers. */
export function formatNumber(value: number | null | undefined): string {
    if (value === null || value === undefined || !Number.isFinite(value))
        return "–";
    if (Number.isInteger(value))
        return String(value);
    const magnitude = Math.abs(value);
    if (magnitude >= 100)
        return value.toFixed(0);
    if (magnitude >= 10)
        return value.toFixed(1);
    if (magnitude >= 1)
        return value.toFixed(2);
    return value.toFixed(3);
}

const byteUnits = ["B", "KiB", "MiB", "GiB", "TiB"];

/** "512 B", "3.5 MiB", "1.2 GiB" (powers of 1024). */
export function formatBytes(bytes: number): string {
    let value = bytes;
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < byteUnits.length - 1) {
        value /= 1024;
        unit++;
    }
    return `${unit === 0 ? value.toFixed(0) : value.toFixed(1)} ${byteUnits[unit]}`;
}

/** "3.2 s", "4m 05s", "2h 03m"; "–" for a negative or non-finite duration. */
export function formatDuration(ms: number): string {
    if (!Number.isFinite(ms) || ms < 0)
        return "–";
    const seconds = ms / 1000;
    if (seconds < 60)
        return `${seconds.toFixed(1)} s`;
    const totalSeconds = Math.floor(seconds);
    const h = Math.floor(totalSeconds / 3600);
    const m = Math.floor((totalSeconds % 3600) / 60);
    const s = totalSeconds % 60;
    return h > 0 ? `${h}h ${pad(m)}m` : `${m}m ${pad(s)}s`;
}

/** "42.1 tok/s". */
export function formatTokensPerS(tokensPerS: number): string {
    return `${tokensPerS.toFixed(1)} tok/s`;
}

/** A count with its noun, singular for one: "1 thread", "4 sequences". */
export function formatCount(count: number, noun: string): string {
    return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** The prompt cache's size for start lines and logs (EngineOptions.promptCacheMiB): "2048 MiB", or "off" for 0. */
export function formatPromptCache(mib: number): string {
    return mib > 0 ? `${mib} MiB` : "off";
}

/**
 * Prefix caching as the engine runs it, for start lines, logs and the panel: "on, tile padding, prompt cache 2048 MiB", "on",
 * "off" (EngineInfo's prefixCache, tilePadding, promptCacheMiB).
 */
export function formatPrefixCache(info: {prefixCache: boolean, tilePadding: boolean, promptCacheMiB: number}): string {
    if (!info.prefixCache)
        return "off";
    return ["on", ...(info.tilePadding ? ["tile padding"] : []), ...(info.promptCacheMiB > 0 ? [`prompt cache ${formatPromptCache(info.promptCacheMiB)}`] : [])]
        .join(", ");
}

/** LoRA adapters for start lines: "a.gguf × 1, b.gguf × 0.5" (file names, either separator), or "" for none. */
export function formatLoraAdapters(adapters: ReadonlyArray<{path: string, scale: number}>): string {
    return adapters.map((adapter) => `${adapter.path.split(/[\\/]/).at(-1) ?? adapter.path} × ${adapter.scale}`).join(", ");
}

/** A parameter count: "1.5 B", "20.0 M", "7.5 K", "512". */
export function formatParams(count: number): string {
    if (count >= 1e9) return `${(count / 1e9).toFixed(1)} B`;
    if (count >= 1e6) return `${(count / 1e6).toFixed(1)} M`;
    if (count >= 1e3) return `${(count / 1e3).toFixed(1)} K`;
    return String(count);
}

/** Local clock time HH:MM:SS of an epoch-ms timestamp. */
export function formatClock(epochMs: number): string {
    const date = new Date(epochMs);
    return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function pad(value: number): string {
    return String(value).padStart(2, "0");
}
