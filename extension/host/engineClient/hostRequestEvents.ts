import type {RequestEvent} from "../../../protocol/engineMessages.js";

/** The host's own lifecycle event: the request entered the host (vLLM's `arrival`). */
export type ArrivalEvent = {kind: "arrival", id: string, t: number, priority: number, maxTokens: number};

/**
 * A lifecycle event as the host publishes it: engine times already moved onto the host clock, plus
 * `receivedAt` (host clock) — the delivery time of that output to the host.
 */
export type HostRequestEvent = ArrivalEvent | (RequestEvent & {receivedAt: number});
