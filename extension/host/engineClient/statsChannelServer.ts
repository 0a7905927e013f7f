import {randomBytes, timingSafeEqual} from "node:crypto";
import {EventEmitter} from "node:events";
import http from "node:http";
import {WebSocketServer, type WebSocket} from "ws";
import {parseStatsMessage, statsMaxPayloadBytes, statsSecretHeader, type StatsHello, type StatsSnapshot} from "../../../protocol/statsChannel.js";
import {errorMessage} from "../../../common/errorMessage.js";
import {listen} from "../net/listen.js";
import {rawDataToString} from "../net/rawData.js";

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
    private readonly secretBytes = Buffer.from(this.secret);

    private constructor(private readonly httpServer: http.Server, private readonly server: WebSocketServer, readonly url: string) {
        super();
        server.on("connection", (socket) => this.accept(socket));
    }

    static async listen(): Promise<StatsChannelServer> {
        let channel: StatsChannelServer | undefined;
        // Plain HTTP gets 426, as from ws's own server; WebSocket upgrades go to `server`.
        const httpServer = http.createServer((_request, response) => {
            response.writeHead(426, {"content-type": "text/plain"}).end("Upgrade Required");
        });
        const server = new WebSocketServer({
            server: httpServer,
            maxPayload: statsMaxPayloadBytes,
            verifyClient: (info, done) => {
                if (channel?.isAuthorized(info.req.headers[statsSecretHeader]))
                    return done(true);
                channel?.reject("stats client refused: missing or wrong secret");
                done(false, 401, "Unauthorized");
            }
        });
        const address = await listen(httpServer, {host: "127.0.0.1", port: 0, purpose: "stats channel"});
        channel = new StatsChannelServer(httpServer, server, `ws://${address.urlHost}:${address.port}`);
        return channel;
    }

    async close(): Promise<void> {
        for (const client of this.server.clients)
            client.terminate();
        await new Promise<void>((resolve) => this.server.close(() => resolve()));
        await new Promise<void>((resolve) => {
            this.httpServer.close(() => resolve());
            this.httpServer.closeAllConnections();
        });
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
                const message = parseStatsMessage(rawDataToString(data));
                if (message.type === "hello")
                    this.emit("hello", message);
                else
                    this.emit("snapshot", {...message, receivedAt});
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
