/**
 * Which part of bench:peer's matrix to run: `--points 1,4,8,poisson`, `--prefix-cache on|off|both` and
 * `--targets ipc,http` (llama-server always runs: every ratio is against it). A narrower matrix buys more
 * repeats of the cells that matter in the same time, so their paired ratios get a useful interval.
 * A bad value is a UsageError naming the flag (bench:peer prints it with its usage, exit 2).
 */
import {UsageError} from "../cli/commandLine.js";

export const peerTargets = ["llama-server", "ipc", "http"] as const;
export type PeerTarget = typeof peerTargets[number];
/** Max concurrency (undefined: no limit) and Poisson rate (Infinity: all at once; NaN: set from the c=8 IPC run). */
export type LoadPoint = {concurrency: number | undefined, rate: number};

export type PeerSelection = {points: LoadPoint[], caches: boolean[], targets: PeerTarget[]};

const closedLoopConcurrencies = [1, 4, 8] as const;

function listOf(flag: string, text: string): string[] {
    const items = text.split(",").map((item) => item.trim());
    if (items.some((item) => item === ""))
        throw new UsageError(`${flag}: an empty item in "${text}"`);
    if (new Set(items).size !== items.length)
        throw new UsageError(`${flag}: an item given twice in "${text}"`);
    return items;
}

/** The load points, in the matrix's order (closed-loop concurrencies ascending, then Poisson). */
export function parsePoints(text: string): LoadPoint[] {
    const items = listOf("--points", text);
    const known = [...closedLoopConcurrencies.map(String), "poisson"];
    const unknown = items.filter((item) => !known.includes(item));
    if (unknown.length > 0)
        throw new UsageError(`--points: unknown point ${unknown.map((u) => `"${u}"`).join(", ")}; choose from ${known.join(", ")}`);
    // The Poisson rate is 0.9 × the IPC request throughput at concurrency 8, so that point needs it.
    if (items.includes("poisson") && !items.includes("8"))
        throw new UsageError("--points: poisson needs 8 too (its rate is 0.9 × the IPC throughput at concurrency 8)");
    return [
        ...closedLoopConcurrencies.filter((c) => items.includes(String(c))).map((concurrency) => ({concurrency, rate: Infinity})),
        ...(items.includes("poisson") ? [{concurrency: undefined, rate: NaN}] : [])
    ];
}

export function parseCaches(text: string): boolean[] {
    switch (text) {
        case "on": return [true];
        case "off": return [false];
        case "both": return [true, false];
        default: throw new UsageError(`--prefix-cache: expected on, off or both, got "${text}"`);
    }
}

/** llama-server and the named ones of ours, in the matrix's order. */
export function parseTargets(text: string): PeerTarget[] {
    const items = listOf("--targets", text);
    const ours = peerTargets.filter((t) => t !== "llama-server") as string[];
    const unknown = items.filter((item) => !ours.includes(item));
    if (unknown.length > 0)
        throw new UsageError(`--targets: unknown target ${unknown.map((u) => `"${u}"`).join(", ")}; choose from ${ours.join(", ")} ` +
            "(llama-server always runs)");
    return peerTargets.filter((t) => t === "llama-server" || items.includes(t));
}

export function parsePeerSelection(options: {points: string, prefixCache: string, targets: string}): PeerSelection {
    return {points: parsePoints(options.points), caches: parseCaches(options.prefixCache), targets: parseTargets(options.targets)};
}
