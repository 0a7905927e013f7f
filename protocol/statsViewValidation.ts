/**
 * Structural checks of the stats payloads the host sends the panel (StatsSnapshotView, StatsDelta):
 * every field the panel reads has the right JSON type, arrays are bounded, timestamps are finite.
 * They check in place and return the value typed (no copy: a snapshot holds hundreds of records).
 * Unknown extra keys are allowed (a newer host may add some). Throws ProtocolError.
 */
import {
    ProtocolError, expectArray, expectInteger, expectNumber, expectObject, expectOneOf, expectString, type JsonObject
} from "./validation.js";
import {finishReasons, parseEngineInfo, requestErrorCodes, type EngineInfo} from "./engineMessages.js";
import {
    engineStateNames, histogramMetrics, maxClients, type ClientStatsView, type HistogramMetric, type HistogramView, type PercentileSummary,
    type StatsCounters, type StatsDelta, type StatsGauges, type StatsSnapshotView, type TimeSeriesPoint
} from "./statsView.js";
import {maxClientLabelLength, type RequestLifecycle} from "./requestLifecycle.js";
import {targetKinds, targetStatuses} from "./targetView.js";

const requestPhases = ["input", "waiting", "running", "preempted", "finished"] as const;

/** Upper bounds on what one message may carry (far above what StatsManager sends). */
export const payloadLimits = {
    timeSeriesPoints: 100_000, requests: 10_000, histogramBuckets: 1_000, preemptions: 1_000,
    /** The named rows and the "other" one. */
    clients: maxClients + 1,
    replicas: 256, notes: 64,
    /** A watched server's slots (llama.cpp's /slots reader reads at most 4096). */
    slots: 4096
} as const;

const gaugeKeys: readonly (keyof StatsGauges)[] = [
    "running", "waiting", "kvUsedTokens", "kvCapacityTokens", "kvCacheUsage", "vramUsedBytes", "vramTotalBytes", "msSinceLastStep",
    "promptTokensPerS", "generationTokensPerS", "requestsPerS", "prefixCacheHitRate", "externalPrefixCacheHitRate"
];
const counterNumberKeys = [
    "promptTokens", "generationTokens", "preemptions", "prefixCacheQueries", "prefixCacheHits", "externalPrefixCacheQueries", "externalPrefixCacheHits",
    "rejectedMessages", "ignoredEvents"
] as const;
const ledgerKeys = ["arrived", "inFlight", "completed", "failed", "aborted"] as const;
const summaryKeys = ["mean", "p50", "p90", "p99", "max"] as const;
const pointNumberKeys = ["t", "promptTokensPerS", "generationTokensPerS", "requestsPerS", "running", "waiting", "kvCacheUsage", "vramUsedBytes"] as const;
const pointNullableKeys = ["ttftP50S", "ttftP99S", "itlP50S", "itlP99S"] as const;
const recordTimeKeys = ["inputProcessed", "queued", "scheduled", "firstToken", "lastToken", "firstDelivered", "finished", "lastDelivered"] as const;
const recordMetricKeys = ["ttftS", "e2eS", "queueS", "prefillS", "decodeS", "inferenceS", "tpotS"] as const;
const clientNumberKeys = ["arrived", "inFlight", "completed", "failed", "aborted", "promptTokens", "generationTokens"] as const;
const clientNullableKeys = ["ttftP50S", "ttftP99S", "itlP50S", "itlP99S"] as const;
const activePeriodKeys = [
    "startedAt", "endedAt", "promptTokens", "generationTokens", "requests", "promptTokensPerS", "generationTokensPerS", "requestsPerS"
] as const;
const configKeys = ["sampleIntervalMs", "throughputWindowMs", "percentileWindowMs", "stallThresholdMs", "maxRecentRequests"] as const;

function expectNullableNumber(obj: JsonObject, key: string, what: string): void {
    if (obj[key] !== null)
        expectNumber(obj, key, what);
}

function optionalNumberField(obj: JsonObject, key: string, what: string): void {
    if (obj[key] !== undefined)
        expectNumber(obj, key, what);
}

/** The engine info a view carries: the one validator of EngineInfo (protocol/engineMessages.ts), named for this boundary. */
function checkEngineInfo(value: unknown, what: string): EngineInfo {
    try {
        return parseEngineInfo(value);
    } catch (error) {
        throw new ProtocolError(`${what}: ${error instanceof Error ? error.message : String(error)}`);
    }
}

function checkEngine(obj: JsonObject, what: string): void {
    if (obj.engine !== null)
        checkEngineInfo(obj.engine, `${what}.engine`);
}

function checkCounterKey(obj: JsonObject, key: string, what: string): void {
    if (key !== "requests") {
        expectNumber(obj, key, what);
        return;
    }
    const ledger = expectObject(obj.requests, `${what}.requests`);
    for (const ledgerKey of ledgerKeys)
        expectNumber(ledger, ledgerKey, `${what}.requests`);
    const byReason = expectObject(ledger.byReason, `${what}.requests.byReason`);
    for (const reason of finishReasons)
        expectNumber(byReason, reason, `${what}.requests.byReason`);
}

function checkCounters(value: unknown, what: string, partial: boolean): Partial<StatsCounters> {
    const obj = expectObject(value, what);
    for (const key of [...counterNumberKeys, "requests"])
        if (!partial || obj[key] !== undefined)
            checkCounterKey(obj, key, what);
    return obj as Partial<StatsCounters>;
}

function checkGauges(value: unknown, what: string, partial: boolean): Partial<StatsGauges> {
    const obj = expectObject(value, what);
    for (const key of gaugeKeys)
        if (!partial || obj[key] !== undefined)
            expectNumber(obj, key, what);
    return obj as Partial<StatsGauges>;
}

function checkSummary(value: unknown, what: string): PercentileSummary {
    const obj = expectObject(value, what);
    expectNumber(obj, "count", what);
    for (const key of summaryKeys)
        expectNullableNumber(obj, key, what);
    return value as PercentileSummary;
}

function checkHistogram(value: unknown, what: string): HistogramView {
    const obj = expectObject(value, what);
    const bounds = expectArray(obj, "bounds", what, payloadLimits.histogramBuckets);
    const counts = expectArray(obj, "counts", what, payloadLimits.histogramBuckets + 1);
    if (!bounds.every(isFiniteNumber) || !counts.every(isFiniteNumber))
        throw new ProtocolError(`${what}: bounds and counts must be finite numbers`);
    if (counts.length !== bounds.length + 1)
        throw new ProtocolError(`${what}: expected counts.length = bounds.length + 1`);
    expectNumber(obj, "sum", what);
    expectNumber(obj, "count", what);
    return value as HistogramView;
}

/** Checks a record keyed by histogram metric; unknown metric names are refused. */
function checkMetricRecord<T>(
    value: unknown,
    what: string,
    partial: boolean,
    check: (item: unknown, what: string) => T
): Partial<Record<HistogramMetric, T>> {
    const obj = expectObject(value, what);
    for (const key of Object.keys(obj))
        if (!(histogramMetrics as readonly string[]).includes(key))
            throw new ProtocolError(`${what}: unknown metric ${JSON.stringify(key.slice(0, 40))}`);
    for (const metric of histogramMetrics)
        if (!partial || obj[metric] !== undefined)
            check(obj[metric], `${what}.${metric}`);
    return obj as Partial<Record<HistogramMetric, T>>;
}

function checkPoint(value: unknown, index: number): TimeSeriesPoint {
    const what = `timeSeries[${index}]`;
    const obj = expectObject(value, what);
    for (const key of pointNumberKeys)
        expectNumber(obj, key, what);
    for (const key of pointNullableKeys)
        expectNullableNumber(obj, key, what);
    return value as TimeSeriesPoint;
}

function checkRequest(value: unknown, index: number): RequestLifecycle {
    const what = `requests[${index}]`;
    const obj = expectObject(value, what);
    expectString(obj, "id", what, 200);
    expectString(obj, "client", what, maxClientLabelLength);
    expectOneOf(obj, "phase", requestPhases, what);
    for (const key of ["priority", "maxTokens", "arrival", "promptTokens", "cachedTokens", "generatedTokens"])
        expectNumber(obj, key, what);
    optionalNumberField(obj, "restoredTokens", what);
    optionalNumberField(obj, "sequence", what);
    optionalNumberField(obj, "prefilledTokens", what);
    for (const key of recordTimeKeys)
        optionalNumberField(obj, key, what);
    const preemptions = expectArray(obj, "preemptions", what, payloadLimits.preemptions);
    if (!preemptions.every(isFiniteNumber))
        throw new ProtocolError(`${what}.preemptions: expected finite numbers`);
    if (obj.reason !== undefined)
        expectOneOf(obj, "reason", finishReasons, what);
    if (obj.error !== undefined)
        expectString(obj, "error", what, 10_000);
    if (obj.errorCode !== undefined)
        expectOneOf(obj, "errorCode", requestErrorCodes, what);
    const metrics = expectObject(obj.metrics, `${what}.metrics`);
    for (const key of recordMetricKeys)
        optionalNumberField(metrics, key, `${what}.metrics`);
    return value as RequestLifecycle;
}

function checkClient(value: unknown, index: number): ClientStatsView {
    const what = `clients[${index}]`;
    const obj = expectObject(value, what);
    expectString(obj, "client", what, maxClientLabelLength);
    for (const key of clientNumberKeys)
        if (expectNumber(obj, key, what) < 0)
            throw new ProtocolError(`${what}.${key}: expected >= 0`);
    for (const key of clientNullableKeys)
        expectNullableNumber(obj, key, what);
    return value as ClientStatsView;
}

function checkClients(obj: JsonObject, what: string): void {
    expectArray(obj, "clients", what, payloadLimits.clients).forEach(checkClient);
}

function checkPoints(obj: JsonObject, what: string): void {
    expectArray(obj, "timeSeries", what, payloadLimits.timeSeriesPoints).forEach(checkPoint);
}

function checkRequests(obj: JsonObject, what: string): void {
    expectArray(obj, "requests", what, payloadLimits.requests).forEach(checkRequest);
}

function expectNullableString(obj: JsonObject, key: string, what: string): void {
    if (obj[key] !== null)
        expectString(obj, key, what, 4096);
}

function checkStrings(obj: JsonObject, key: string, what: string): void {
    if (!expectArray(obj, key, what, payloadLimits.notes).every((note) => typeof note === "string"))
        throw new ProtocolError(`${what}.${key}: expected strings`);
}

/** A `target` field: null, or the watched servers' view. */
function checkTarget(obj: JsonObject, what: string): void {
    if (obj.target === null)
        return;
    const target = expectObject(obj.target, `${what}.target`);
    expectArray(target, "replicas", `${what}.target`, payloadLimits.replicas).forEach((value, i) => {
        const where = `${what}.target.replicas[${i}]`;
        const replica = expectObject(value, where);
        expectString(replica, "name", where, 4096);
        expectString(replica, "url", where, 4096);
        expectOneOf(replica, "kind", targetKinds, where);
        expectOneOf(replica, "status", targetStatuses, where);
        expectNumber(replica, "since", where);
        for (const key of ["model", "version", "error"])
            expectNullableString(replica, key, where);
        for (const key of ["running", "waiting", "kvCacheUsage", "vramUsedBytes"])
            expectNullableNumber(replica, key, where);
        if (replica.slots !== undefined)
            expectArray(replica, "slots", where, payloadLimits.slots).forEach((slotValue, j) => {
                const slot = expectObject(slotValue, `${where}.slots[${j}]`);
                if (typeof slot.processing !== "boolean")
                    throw new ProtocolError(`${where}.slots[${j}].processing: expected a boolean`);
                expectNumber(slot, "tokens", `${where}.slots[${j}]`);
                expectNumber(slot, "contextSize", `${where}.slots[${j}]`);
            });
    });
    checkStrings(target, "notReported", `${what}.target`);
    checkStrings(target, "notes", `${what}.target`);
    const estimated = expectObject(target.estimated, `${what}.target.estimated`);
    for (const [metric, value] of Object.entries(estimated)) {
        if (!(histogramMetrics as readonly string[]).includes(metric))
            throw new ProtocolError(`${what}.target.estimated: unknown metric ${JSON.stringify(metric)}`);
        const where = `${what}.target.estimated.${metric}`;
        const summary = expectObject(value, where);
        expectNumber(summary, "count", where);
        for (const key of ["mean", "p50", "p90", "p99"])
            expectNullableNumber(summary, key, where);
    }
}

/** A `lastActive` field: null, or the last ended active period (no negative count or rate, not ending before it started). */
function checkLastActive(obj: JsonObject, what: string): void {
    if (obj.lastActive === null)
        return;
    const where = `${what}.lastActive`;
    const period = expectObject(obj.lastActive, where);
    for (const key of activePeriodKeys)
        if (expectNumber(period, key, where) < 0)
            throw new ProtocolError(`${where}.${key}: expected >= 0`);
    if (expectNumber(period, "endedAt", where) < expectNumber(period, "startedAt", where))
        throw new ProtocolError(`${where}: ends before it starts`);
}

/** Checks a full StatsSnapshotView. */
export function checkSnapshotView(value: unknown, what = "snapshot"): StatsSnapshotView {
    const obj = expectObject(value, what);
    expectNumber(obj, "t", what);
    const config = expectObject(obj.config, `${what}.config`);
    for (const key of configKeys)
        expectNumber(config, key, `${what}.config`);
    checkEngine(obj, what);
    expectOneOf(obj, "state", engineStateNames, what);
    checkCounters(obj.counters, `${what}.counters`, false);
    checkGauges(obj.gauges, `${what}.gauges`, false);
    checkMetricRecord(obj.percentiles, `${what}.percentiles`, false, checkSummary);
    checkMetricRecord(obj.histograms, `${what}.histograms`, false, checkHistogram);
    checkPoints(obj, what);
    checkRequests(obj, what);
    checkClients(obj, what);
    // A host from before targets sends no `target`: read it as "our own engine".
    if (obj.target === undefined)
        obj.target = null;
    checkTarget(obj, what);
    // Nor `lastActive` (from before it): "no period yet".
    if (obj.lastActive === undefined)
        obj.lastActive = null;
    checkLastActive(obj, what);
    return value as StatsSnapshotView;
}

/** Checks a StatsDelta: `t`, `seq` and whichever sections are present. */
export function checkDelta(value: unknown, what = "delta"): StatsDelta {
    const obj = expectObject(value, what);
    expectNumber(obj, "t", what);
    const seq = expectInteger(obj, "seq", what);
    if (seq < 0)
        throw new ProtocolError(`${what}.seq: expected >= 0`);
    if (obj.engine !== undefined)
        checkEngine(obj, what);
    if (obj.state !== undefined)
        expectOneOf(obj, "state", engineStateNames, what);
    if (obj.counters !== undefined)
        checkCounters(obj.counters, `${what}.counters`, true);
    if (obj.gauges !== undefined)
        checkGauges(obj.gauges, `${what}.gauges`, true);
    if (obj.percentiles !== undefined)
        checkMetricRecord(obj.percentiles, `${what}.percentiles`, true, checkSummary);
    if (obj.histograms !== undefined)
        checkMetricRecord(obj.histograms, `${what}.histograms`, true, checkHistogram);
    if (obj.timeSeries !== undefined)
        checkPoints(obj, what);
    if (obj.requests !== undefined)
        checkRequests(obj, what);
    if (obj.clients !== undefined)
        checkClients(obj, what);
    if (obj.target !== undefined)
        checkTarget(obj, what);
    if (obj.lastActive !== undefined)
        checkLastActive(obj, what);
    if (obj.reset !== undefined)
        checkSnapshotView(obj.reset, `${what}.reset`);
    return value as StatsDelta;
}

function isFiniteNumber(value: unknown): value is number {
    return typeof value === "number" && Number.isFinite(value);
}
