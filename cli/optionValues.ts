/** Checks and converts one flag's text (from readCommandLine's values); a bad value is a UsageError naming the flag. */
import {existingDirectory} from "../common/existingDirectory.js";
import {UsageError} from "./commandLine.js";

/** An integer in [min, max]; `fallback` when the flag is absent. */
export function integerValue(name: string, raw: string | undefined, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    if (raw === undefined)
        return fallback;
    const value = raw.trim() === "" ? NaN : Number(raw);
    if (!Number.isSafeInteger(value) || value < min || value > max) {
        const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
        throw new UsageError(`--${name} must be an integer ${range}, got ${JSON.stringify(raw)}`);
    }
    return value;
}

/** A TCP port, 0..65535; `fallback` when absent. */
export function portValue(name: string, raw: string | undefined, fallback: number): number {
    return integerValue(name, raw, fallback, 0, 65535);
}

/** A finite number > 0; `fallback` when absent; "inf" is Infinity when `allowInfinity`. */
export function positiveNumberValue(name: string, raw: string | undefined, fallback: number, allowInfinity = false): number {
    if (raw === undefined)
        return fallback;
    if (allowInfinity && raw === "inf")
        return Infinity;
    const value = raw.trim() === "" ? NaN : Number(raw);
    if (!Number.isFinite(value) || value <= 0)
        throw new UsageError(`--${name} must be a positive number${allowInfinity ? ' or "inf"' : ""}, got ${JSON.stringify(raw)}`);
    return value;
}

/** A number in [0, 1) — a fraction that may be 0 but not 1; `fallback` when absent. */
export function fractionValue(name: string, raw: string | undefined, fallback: number): number {
    if (raw === undefined)
        return fallback;
    const value = raw.trim() === "" ? NaN : Number(raw);
    if (!Number.isFinite(value) || value < 0 || value >= 1)
        throw new UsageError(`--${name} must be a number from 0 up to (not including) 1, got ${JSON.stringify(raw)}`);
    return value;
}

/** One of `choices`; `fallback` when absent. */
export function choiceValue<Choice extends string>(name: string, raw: string | undefined, choices: readonly Choice[],
                                                   fallback: Choice): Choice {
    if (raw === undefined)
        return fallback;
    if (!(choices as readonly string[]).includes(raw)) {
        const list = choices.length > 1 ? `${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}` : String(choices[0]);
        throw new UsageError(`--${name} must be ${list}, got ${JSON.stringify(raw)}`);
    }
    return raw as Choice;
}

/**
 * `--threads -1` → `--threads=-1` for every option that takes a value: node's parseArgs reads a
 * value starting with "-" as another option ("argument is ambiguous"), so a negative number would
 * never reach the checks above that say what the flag needs.
 */
export function joinNegativeNumberValues(args: readonly string[], valueOptions: ReadonlySet<string>): string[] {
    const joined: string[] = [];
    for (let i = 0; i < args.length; i++) {
        const arg = args[i]!;
        if (arg === "--") {
            joined.push(...args.slice(i));
            break;
        }
        const next = args[i + 1];
        if (arg.startsWith("--") && valueOptions.has(arg.slice(2)) && next !== undefined && /^-(\d|\.\d)/.test(next)) {
            joined.push(`${arg}=${next}`);
            i++;
        } else
            joined.push(arg);
    }
    return joined;
}

/** An existing directory, as an absolute path. */
export function directoryValue(name: string, raw: string): string {
    const directory = existingDirectory(raw);
    if (directory === undefined)
        throw new UsageError(`--${name} must be an existing directory, got ${JSON.stringify(raw)}`);
    return directory;
}
