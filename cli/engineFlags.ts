/** Engine flags that more than one command takes (`bench`, `serve`), declared once: the declaration and its reading. */
import type {CliOption} from "./commandLine.js";
import {choiceValue} from "./optionValues.js";

/** `--prefix-cache on|off`: EngineOptions.prefixCache (protocol/engineOptions.ts). */
export const prefixCacheFlag = {
    type: "string", placeholder: "on|off",
    description: "prefix caching: a request reuses the KV cache of a finished one whose prompt starts the same (default on)"
} as const satisfies CliOption;

/** EngineOptions.prefixCache from `--prefix-cache`; throws UsageError for anything but on/off. */
export function prefixCacheValue(raw: string | undefined): boolean {
    return choiceValue("prefix-cache", raw, ["on", "off"], "on") === "on";
}
