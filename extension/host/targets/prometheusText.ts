/**
 * Reads Prometheus's text exposition format (version 0.0.4, what vLLM's prometheus_client, llama.cpp's
 * server and prom-client serve) into typed samples and histograms. Hand-written on purpose: the npm
 * parser this project tests its own output with (parse-prometheus-text-format 1.1.1) drops a
 * histogram's labels, `_sum` and `_count`, and folds vLLM's data-parallel ranks (`engine="0"`,
 * `engine="1"`) into one series, which is exactly what a scraper of replicas must keep apart.
 */
import {checkHistogram, HistogramShapeError, type BucketHistogram} from "./bucketHistogram.js";

export type Labels = Readonly<Record<string, string>>;
export type Sample = {readonly name: string, readonly labels: Labels, readonly value: number};
export type ScrapedHistogram = BucketHistogram & {readonly labels: Labels};

/** One scrape: samples by metric name, histograms by family name (without `_bucket`). */
export type Exposition = {
    readonly types: ReadonlyMap<string, string>,
    readonly samples: ReadonlyMap<string, readonly Sample[]>,
    readonly histograms: ReadonlyMap<string, readonly ScrapedHistogram[]>
};

export class ExpositionError extends Error {
    override readonly name = "ExpositionError";
}

const maxLines = 200_000;
const metricName = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** Parses a whole scrape; throws ExpositionError naming the line for anything that is not the format. */
export function parseExposition(text: string): Exposition {
    const types = new Map<string, string>();
    const samples = new Map<string, Sample[]>();
    const lines = text.split("\n");
    if (lines.length > maxLines)
        throw new ExpositionError(`more than ${maxLines} lines`);
    lines.forEach((raw, index) => {
        const line = raw.trim();
        if (line === "")
            return;
        if (line.startsWith("#")) {
            const type = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
            if (type !== null)
                types.set(type[1]!, type[2]!.toLowerCase());
            return;
        }
        const sample = parseSampleLine(line, index + 1);
        let list = samples.get(sample.name);
        if (list === undefined)
            samples.set(sample.name, list = []);
        list.push(sample);
    });
    return {types, samples, histograms: collectHistograms(types, samples)};
}

/** A server's `/metrics` answer, or an error that says which server sent what. */
export function parseMetricsAnswer(url: string, text: string): Exposition {
    try {
        return parseExposition(text);
    } catch (error) {
        if (error instanceof ExpositionError || error instanceof HistogramShapeError)
            throw new MetricsTextError(`${url} is not Prometheus text: ${error.message}`);
        throw error;
    }
}

export class MetricsTextError extends Error {
    override readonly name = "MetricsTextError";
}

/** The value of the one sample of `name` whose labels include `match` (all of them when `match` is empty), summed. */
export function sumSamples(exposition: Exposition, name: string, match: Labels = {}): number | undefined {
    const list = exposition.samples.get(name)?.filter((sample) => matches(sample.labels, match));
    if (list === undefined || list.length === 0)
        return undefined;
    return list.reduce((sum, sample) => sum + sample.value, 0);
}

export function matches(labels: Labels, match: Labels): boolean {
    return Object.entries(match).every(([key, value]) => labels[key] === value);
}

function parseSampleLine(line: string, lineNo: number): Sample {
    const name = metricName.exec(line)?.[0];
    if (name === undefined)
        throw new ExpositionError(`line ${lineNo}: expected a metric name, got ${JSON.stringify(line.slice(0, 80))}`);
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith("{")) {
        rest = rest.slice(1);
        for (;;) {
            rest = rest.trimStart();
            if (rest.startsWith("}")) {
                rest = rest.slice(1);
                break;
            }
            const key = labelName.exec(rest)?.[0];
            if (key === undefined || rest[key.length] !== "=" || rest[key.length + 1] !== "\"")
                throw new ExpositionError(`line ${lineNo}: malformed labels in ${JSON.stringify(line.slice(0, 120))}`);
            const {value, length} = readQuoted(rest.slice(key.length + 2), lineNo);
            labels[key] = value;
            rest = rest.slice(key.length + 2 + length).trimStart();
            if (rest.startsWith(","))
                rest = rest.slice(1);
            else if (!rest.startsWith("}"))
                throw new ExpositionError(`line ${lineNo}: expected , or } after label ${key}`);
        }
    }
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === "")
        throw new ExpositionError(`line ${lineNo}: expected a value (and optionally a timestamp) after ${name}`);
    const value = parseValue(fields[0]!);
    if (value === undefined)
        throw new ExpositionError(`line ${lineNo}: ${JSON.stringify(fields[0])} is not a number`);
    return {name, labels, value};
}

/** A label value up to its closing quote, with the format's escapes (\\, \", \n). */
function readQuoted(text: string, lineNo: number): {value: string, length: number} {
    let value = "";
    for (let i = 0; i < text.length; i++) {
        const c = text[i]!;
        if (c === "\"")
            return {value, length: i + 1};
        if (c === "\\") {
            const next = text[++i];
            value += next === "n" ? "\n" : next ?? "";
        } else
            value += c;
    }
    throw new ExpositionError(`line ${lineNo}: unterminated label value`);
}

function parseValue(text: string): number | undefined {
    switch (text) {
        case "+Inf": case "Inf": return Number.POSITIVE_INFINITY;
        case "-Inf": return Number.NEGATIVE_INFINITY;
        case "NaN": return Number.NaN;
    }
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text))
        return undefined;
    return Number(text);
}

/** Groups `<family>_bucket` / `_sum` / `_count` samples of each histogram family by their other labels. */
function collectHistograms(types: ReadonlyMap<string, string>, samples: ReadonlyMap<string, Sample[]>): Map<string, ScrapedHistogram[]> {
    const out = new Map<string, ScrapedHistogram[]>();
    for (const [family, type] of types) {
        if (type !== "histogram")
            continue;
        const series = new Map<string, {labels: Labels, buckets: Array<[number, number]>, sum: number, count: number | undefined}>();
        const seriesOf = (labels: Labels) => {
            const {le: _le, ...rest} = labels;
            const key = JSON.stringify(Object.entries(rest).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0));
            let entry = series.get(key);
            if (entry === undefined)
                series.set(key, entry = {labels: rest, buckets: [], sum: 0, count: undefined});
            return entry;
        };
        for (const sample of samples.get(`${family}_bucket`) ?? []) {
            const le = sample.labels.le === undefined ? undefined : parseValue(sample.labels.le);
            if (le === undefined)
                throw new ExpositionError(`${family}_bucket has a sample without a numeric le label`);
            seriesOf(sample.labels).buckets.push([le, sample.value]);
        }
        for (const sample of samples.get(`${family}_sum`) ?? [])
            seriesOf(sample.labels).sum = sample.value;
        for (const sample of samples.get(`${family}_count`) ?? [])
            seriesOf(sample.labels).count = sample.value;
        const histograms: ScrapedHistogram[] = [];
        for (const entry of series.values()) {
            const buckets = entry.buckets.sort((a, b) => a[0] - b[0]);
            const histogram: ScrapedHistogram = {
                labels: entry.labels,
                bounds: buckets.map(([bound]) => bound),
                counts: buckets.map(([, count]) => count),
                sum: entry.sum,
                count: entry.count ?? buckets.at(-1)?.[1] ?? 0
            };
            checkHistogram(histogram, `${family}${JSON.stringify(entry.labels)}`);
            histograms.push(histogram);
        }
        out.set(family, histograms);
    }
    return out;
}
