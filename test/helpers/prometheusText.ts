/**
 * The independent parser the tests read Prometheus text with (parse-prometheus-text-format, not our
 * own code), typed once, and what the `watch` tests read from it.
 */

/** What parse-prometheus-text-format returns (it ships no types). */
export type PromSample = {value?: string, labels?: Record<string, string>, buckets?: Record<string, string>, count?: string, sum?: string};
export type PromFamily = {name: string, help: string, type: string, metrics: PromSample[]};

// eslint-disable-next-line @typescript-eslint/no-require-imports -- untyped CommonJS package: `import` would be an implicit any (TS7016)
export const parsePrometheusTextFormat = require("parse-prometheus-text-format") as (text: string) => PromFamily[];

/** `vllm:generation_tokens_total` per `engine` label value (each watched server's own series). */
export function generationByEngine(metrics: string): Record<string, number> {
    const family = parsePrometheusTextFormat(metrics).find((f) => f.name === "vllm:generation_tokens_total");
    return Object.fromEntries((family?.metrics ?? []).map((m) => [m.labels?.engine ?? "?", Number(m.value)]));
}
