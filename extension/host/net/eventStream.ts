/**
 * A server-sent-event stream's start and its keep-alive. A request may be silent for long before its first token: it
 * waits for a sequence, or its long prompt is evaluated on a CPU. Clients and proxies give up on a silent connection
 * (Node's fetch after 300 s without a byte; many proxies sooner), so after `pingIntervalMs` without a write the stream
 * sends an SSE comment line (`:`), which every SSE parser skips, as llama-server does every 30 s by default.
 */
import type http from "node:http";

/** llama-server's default: seconds of silence before a ping. */
export const defaultSsePingIntervalS = 30;

/**
 * Sends the status line and headers now; returns the writer of the stream's text (nothing once the client has gone).
 * `pingIntervalMs` ≤ 0: no pings.
 */
export function startEventStream(response: http.ServerResponse, pingIntervalMs: number): (text: string) => void {
    response.writeHead(200, {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"});
    response.flushHeaders();
    let lastWrite = performance.now();
    if (pingIntervalMs > 0) {
        // Checked a few times per interval (at most each second): a write costs no timer work, and a ping comes at most a
        // quarter interval (or a second) late.
        const timer = setInterval(() => {
            if (response.destroyed || response.writableEnded)
                clearInterval(timer);
            else if (performance.now() - lastWrite >= pingIntervalMs) {
                response.write(":\n\n");
                lastWrite = performance.now();
            }
        }, Math.min(1000, Math.max(10, pingIntervalMs / 4)));
        timer.unref();
        response.once("close", () => clearInterval(timer));
    }
    return (text) => {
        if (response.destroyed)
            return;
        response.write(text);
        lastWrite = performance.now();
    };
}
