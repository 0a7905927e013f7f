/**
 * WebSocket clients for the dashboard's /stream: one that collects what the server sends, validated;
 * one written by hand on a raw socket that can stop reading (a client that never reads).
 */
import crypto from "node:crypto";
import net from "node:net";
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

/** A frame from the server, as the raw client saw it (opcode 1 text, 8 close, 9 ping). */
export type RawFrame = {opcode: number, payload: Buffer};

export type RawStreamClient = {
    socket: net.Socket,
    /** Frames parsed so far (only while the socket is read: see `pause`). */
    frames: RawFrame[],
    /** Sends one masked text frame per string, all in one write. */
    sendText(...texts: string[]): void,
    /** Stops reading: what the server sends piles up in the kernel, then in the server. */
    pause(): void,
    resume(): void,
    /** Resolves when the TCP connection has ended (read side), with the close frame's code if one came. */
    ended: Promise<{closeCode: number | undefined, closeReason: string}>
};

/**
 * A WebSocket client written by hand on a raw TCP socket, for a client that never reads: it does the
 * upgrade itself, masks what it sends, and can stop reading at the socket (ws hides its socket).
 */
export async function connectRawStream(url: string, headers: Record<string, string> = {}): Promise<RawStreamClient> {
    const target = new URL(url);
    const socket = net.connect(Number(target.port), target.hostname);
    await new Promise<void>((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
    });
    const key = crypto.randomBytes(16).toString("base64");
    const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("");
    socket.write(`GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
    let buffer = Buffer.alloc(0);
    await new Promise<void>((resolve, reject) => {
        const onData = (chunk: Buffer): void => {
            buffer = Buffer.concat([buffer, chunk]);
            const end = buffer.indexOf("\r\n\r\n");
            if (end < 0)
                return;
            socket.off("data", onData);
            const head = buffer.subarray(0, end).toString("latin1");
            buffer = buffer.subarray(end + 4);
            if (!head.startsWith("HTTP/1.1 101"))
                reject(new Error(`unexpected response ${head.split("\r\n")[0]}`));
            else
                resolve();
        };
        socket.on("data", onData);
        socket.once("error", reject);
    });
    const frames: RawFrame[] = [];
    const parse = (): void => {
        for (;;) {
            if (buffer.length < 2)
                return;
            let length = buffer[1]! & 0x7f;
            let offset = 2;
            if (length === 126) {
                if (buffer.length < 4) return;
                length = buffer.readUInt16BE(2);
                offset = 4;
            } else if (length === 127) {
                if (buffer.length < 10) return;
                length = Number(buffer.readBigUInt64BE(2));
                offset = 10;
            }
            if (buffer.length < offset + length)
                return;
            frames.push({opcode: buffer[0]! & 0x0f, payload: Buffer.from(buffer.subarray(offset, offset + length))});
            buffer = buffer.subarray(offset + length);
        }
    };
    parse();
    socket.on("data", (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk]);
        parse();
    });
    socket.on("error", () => undefined); // a reset after the server cuts it off
    const ended = new Promise<{closeCode: number | undefined, closeReason: string}>((resolve) => socket.once("close", () => {
        const close = frames.find((frame) => frame.opcode === 8);
        resolve({closeCode: close !== undefined && close.payload.length >= 2 ? close.payload.readUInt16BE(0) : undefined,
            closeReason: close?.payload.subarray(2).toString("utf8") ?? ""});
    }));
    return {
        socket, frames, ended,
        sendText: (...texts) => socket.write(Buffer.concat(texts.map(maskedTextFrame))),
        pause: () => socket.pause(),
        resume: () => socket.resume()
    };
}

function maskedTextFrame(text: string): Buffer {
    const payload = Buffer.from(text, "utf8");
    const length = payload.length;
    const header = length < 126 ? Buffer.from([0x81, 0x80 | length])
        : Buffer.from([0x81, 0x80 | 126, length >> 8, length & 0xff]);
    const mask = crypto.randomBytes(4);
    const masked = Buffer.alloc(length);
    for (let i = 0; i < length; i++)
        masked[i] = payload[i]! ^ mask[i % 4]!;
    return Buffer.concat([header, mask, masked]);
}
