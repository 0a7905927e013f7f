/**
 * llama.cpp's request field `sse_ping_interval`, on every endpoint that streams server-sent events: the seconds a stream
 * may stay silent before the server sends a keep-alive comment (extension/host/net/eventStream.ts); −1 or 0: none.
 * Absent: the server's setting.
 */
import {optionalNumberField} from "./openaiFields.js";
import {isObject} from "./validation.js";

/** The field of a request body, validated (a 400 naming it otherwise); undefined when absent. */
export function parseSsePingInterval(body: unknown): number | undefined {
    return isObject(body) ? optionalNumberField(body, "sse_ping_interval", -1, 2 ** 31 - 1, true) : undefined;
}
