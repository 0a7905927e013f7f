import {randomBytes, timingSafeEqual} from "node:crypto";
import {EventEmitter} from "node:events";
import type {AddressInfo} from "node:net";
import {WebSocketServer, type WebSocket} from "ws";
import {parseStatsMessage, statsMaxPayloadBytes, statsSecretHeader, type StatsHello, type StatsSnapshot} from "../../../protocol/statsChannel.js";
import {errorMessage} from "../../../common/errorMessage.js";

export type ReceivedSnapshot = StatsSnapshot & {receivedAt: number};

export type StatsChannelEvents = {
    snapshot: [ReceivedSnapshot],
    hello: [StatsHello],
    /** A frame or client was refused: bad secret, malformed JSON, unknown type, oversized frame. */
    rejected: [string]
};

/**
 * The host's end of the stats channel: a WebSocket server on 127.0.0.1, random port, that accepts
 * only clients presenting this spawn's random secret. Bad frames are dropped and counted, never thrown.
 */
export class StatsChannelServer extends EventEmitter<StatsChannelEvents> {
    readonly secret = randomBytes(32).toString("hex");
    rejectedCount = 0;
    snapshotCount = 0;
    private readonly secretBytes = Buffer.from(this.secret);
    private readonly server: WebSocketServer;

    private constructor(server: WebSocketServer) {
        super();
        this.server = server;
        server.on("connection", (socket) => this.accept(socket));
    }

    static async listen(): Promise<StatsChannelServer> {
        let channel: StatsChannelServer | undefined;
        const server = new WebSocketServer({
            host: "127.0.0.1",
            port: 0,
            maxPayload: statsMaxPayloadBytes,
            verifyClient: (info, done) => {
                if (channel?.isAuthorized(info.req.headers[statsSecretHeader]))
                    return done(true);
                channel?.reject("stats client refused: missing or wrong secret");
                done(false, 401, "Unauthorized");
            }
        });
        channel = new StatsChannelServer(server);
        await new Promise<void>((resolve, reject) => {
            server.once("listening", resolve);
            server.once("error", reject);
        });
        return channel;
    }

    get url(): string {
        const address = this.server.address() as AddressInfo;
        return `ws://127.0.0.1:${address.port}`;
    }

    async close(): Promise<void> {
        for (const client of this.server.clients)
            client.terminate();
        await new Promise<void>((resolve) => this.server.close(() => resolve()));
    }

    private isAuthorized(header: string | string[] | undefined): boolean {
        if (typeof header !== "string")
            return false;
        const given = Buffer.from(header);
        return given.length === this.secretBytes.length && timingSafeEqual(given, this.secretBytes);
    }

    private accept(socket: WebSocket): void {
        socket.on("message", (data, isBinary) => {
            if (isBinary) {
                this.reject("stats frame refused: binary frames are not part of the protocol");
                return;
            }
            const receivedAt = Date.now();
            try {
                const message = parseStatsMessage(data.toString());
                if (message.type === "hello")
                    this.emit("hello", message);
                else {
                    this.snapshotCount++;
                    this.emit("snapshot", {...message, receivedAt});
                }
            } catch (error) {
                this.reject(`stats frame refused: ${errorMessage(error)}`);
            }
        });
        socket.on("error", (error) => {
            // ws reports oversized frames (1009) and protocol violations here, then closes the socket.
            this.reject(`stats connection error: ${errorMessage(error)}`);
        });
    }

    private reject(reason: string): void {
        this.rejectedCount++;
        this.emit("rejected", reason);
    }
}
