/**
 * How fast one request went, from its own lifecycle timestamps (host clock), for the request
 * timeline's tooltip: its output rate end to end, its time to first token and its mean inter-token
 * latency. Definitions as RequestLifecycle's metrics (protocol/requestLifecycle.ts).
 */
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {formatNumber} from "../../common/format.js";

export type RequestSpeed = {
    /** Generated tokens ÷ (finish delivered − arrival), or ÷ (now − arrival) while it runs; null without elapsed time. */
    outputTokensPerS: number | null,
    /** Seconds the rate is over. */
    elapsedS: number,
    /** Still running: the rate is so far. */
    running: boolean,
    /** First tokens delivered − arrival, seconds; null before the first token. */
    ttftS: number | null,
    /** (last token − first token) ÷ (generated − 1), seconds; null with fewer than 2 tokens. */
    meanItlS: number | null
};

/** `now` (host clock) ends a request still running. */
export function requestSpeed(record: RequestLifecycle, now: number): RequestSpeed {
    const running = record.phase !== "finished";
    const end = running ? now : record.lastDelivered ?? record.finished ?? now;
    const elapsedS = Math.max(0, end - record.arrival) / 1000;
    const {firstDelivered, firstToken, lastToken, generatedTokens} = record;
    return {
        outputTokensPerS: elapsedS > 0 ? generatedTokens / elapsedS : null,
        elapsedS,
        running,
        ttftS: firstDelivered === undefined ? null : (firstDelivered - record.arrival) / 1000,
        meanItlS: generatedTokens >= 2 && firstToken !== undefined && lastToken !== undefined
            ? (lastToken - firstToken) / 1000 / (generatedTokens - 1)
            : null
    };
}

/** The tooltip's lines: "output 258 tok/s (16 tokens in 0.062 s)", "TTFT 32.0 ms", "ITL 3.00 ms (mean)". */
export function requestSpeedLines(record: RequestLifecycle, now: number): string[] {
    const speed = requestSpeed(record, now);
    const ms = (seconds: number | null): string => seconds === null ? "–" : `${formatNumber(seconds * 1000)} ms`;
    return [
        `output ${formatNumber(speed.outputTokensPerS)} tok/s (${record.generatedTokens} tokens in ${formatNumber(speed.elapsedS)} s${speed.running ? ", so far" : ""})`,
        `TTFT ${ms(speed.ttftS)}`,
        `ITL ${ms(speed.meanItlS)} (mean)`
    ];
}
