/**
 * Closes HTTP connections that do not deliver a complete request (or WebSocket upgrade) within
 * `timeoutMs` of connecting: an idle or half-sent socket cannot hold a slot for Node's default 60 s+
 * (its header timeout is only checked every 30 s). Later idle time on keep-alive connections is Node's
 * `keepAliveTimeout`; upgraded WebSockets have their own keepalive.
 */
import type http from "node:http";
import type net from "node:net";

export function closeConnectionsWithoutRequest(server: http.Server, timeoutMs: number, onTimeout: () => void): void {
    const timers = new WeakMap<net.Socket, NodeJS.Timeout>();
    const settle = (request: http.IncomingMessage): void => {
        clearTimeout(timers.get(request.socket));
        timers.delete(request.socket);
    };
    server.on("connection", (socket: net.Socket) => {
        const timer = setTimeout(() => {
            timers.delete(socket);
            onTimeout();
            socket.destroy();
        }, timeoutMs);
        timer.unref();
        timers.set(socket, timer);
        socket.once("close", () => clearTimeout(timer));
    });
    server.prependListener("request", settle);
    server.prependListener("upgrade", settle);
}
