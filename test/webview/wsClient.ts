/** A WebSocket client for the dashboard's /stream that collects what the server sends, validated. */
import WebSocket from "ws";
import {parseHostToPanel, type HostToPanel} from "../../protocol/panelMessages.js";
import {rawDataToString} from "../../extension/host/net/rawData.js";

export type StreamClient = {
    socket: WebSocket,
    messages: Array<HostToPanel & {receivedAt: number}>,
    /** Resolves once `count` messages (in total) matching `filter` have arrived. */
    waitFor(filter: (message: HostToPanel) => boolean, count?: number, timeoutMs?: number): Promise<HostToPanel[]>,
    sendRaw(data: string | Buffer): void,
    closed: Promise<{code: number}>
};

export async function connectStream(url: string, headers: Record<string, string> = {}): Promise<StreamClient> {
    const socket = new WebSocket(url, {headers});
    const messages: StreamClient["messages"] = [];
    const waiters = new Set<() => void>();
    socket.on("message", (data) => {
        messages.push({...parseHostToPanel(rawDataToString(data)), receivedAt: performance.now()});
        for (const wake of waiters)
            wake();
    });
    const closed = new Promise<{code: number}>((resolve) => socket.on("close", (code) => resolve({code})));
    await new Promise<void>((resolve, reject) => {
        socket.once("open", () => resolve());
        socket.once("error", reject);
        socket.once("unexpected-response", (_request, response) => reject(new Error(`unexpected response ${response.statusCode}`)));
    });
    return {
        socket, messages, closed,
        sendRaw: (data) => socket.send(data),
        waitFor: (filter, count = 1, timeoutMs = 10_000) => new Promise((resolve, reject) => {
            const check = (): boolean => {
                const found = messages.filter(filter);
                if (found.length < count)
                    return false;
                waiters.delete(wake);
                clearTimeout(timer);
                resolve(found);
                return true;
            };
            const wake = (): void => {
                check();
            };
            const timer = setTimeout(() => {
                waiters.delete(wake);
                reject(new Error(`timed out waiting for ${count} messages; got ${JSON.stringify(messages.map((m) => m.type))}`));
            }, timeoutMs);
            if (!check())
                waiters.add(wake);
        })
    };
}
