/** Number, size, duration and clock-time formatting for the panel's text. */

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

export function formatBytes(bytes: number): string {
    let value = bytes;
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < byteUnits.length - 1) {
        value /= 1024;
        unit++;
    }
    return `${unit === 0 ? value.toFixed(0) : value.toFixed(1)} ${byteUnits[unit]}`;
}

/** "3.2 s", "4m 05s", "2h 03m". */
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

/** Local clock time HH:MM:SS of an epoch-ms timestamp. */
export function formatClock(epochMs: number): string {
    const date = new Date(epochMs);
    return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function pad(value: number): string {
    return String(value).padStart(2, "0");
}
