import http from "node:http";
import {listen, PortInUseError} from "../../net/listen.js";
import {allowedHostHeader} from "../../net/hostCheck.js";
import {errorMessage} from "../../../../common/errorMessage.js";

export class PrometheusServerError extends Error {
    override readonly name = "PrometheusServerError";
}

export type MetricsBody = {contentType: string, body: string};

/** A minimal HTTP server answering `GET /metrics` (and HEAD); 404 elsewhere, 405 for other methods. */
export class MetricsHttpServer {
    private constructor(private readonly server: http.Server, readonly port: number, readonly url: string) {}

    static async listen(host: string, port: number, render: () => Promise<MetricsBody>): Promise<MetricsHttpServer> {
        if (!Number.isInteger(port) || port < 0 || port > 65535)
            throw new PrometheusServerError(`Prometheus port must be an integer from 0 to 65535, got ${port}`);
        let boundPort = port;
        const server = http.createServer((request, response) => {
            // A page on another site that resolves its name to 127.0.0.1 (DNS rebinding) must not read the numbers.
            if (!allowedHostHeader(request.headers.host, host, boundPort)) {
                response.writeHead(403, {"content-type": "text/plain; charset=utf-8"}).end("forbidden host\n");
                return;
            }
            const path = (request.url ?? "/").split("?")[0];
            if (path !== "/metrics") {
                response.writeHead(404, {"content-type": "text/plain; charset=utf-8"}).end("Not found. Metrics are at /metrics\n");
                return;
            }
            if (request.method !== "GET" && request.method !== "HEAD") {
                response.writeHead(405, {allow: "GET, HEAD"}).end();
                return;
            }
            render().then(({contentType, body}) => {
                response.writeHead(200, {"content-type": contentType});
                response.end(request.method === "HEAD" ? undefined : body);
            }, (error: unknown) => {
                response.writeHead(500, {"content-type": "text/plain; charset=utf-8"}).end(`metrics failed: ${String(error)}\n`);
            });
        });
        const address = await listen(server, {host, port, purpose: "Prometheus"}).catch((error: unknown) => {
            throw error instanceof PortInUseError
                ? error
                : new PrometheusServerError(`could not serve Prometheus metrics on ${host}:${port}: ${errorMessage(error)}`);
        });
        boundPort = address.port;
        return new MetricsHttpServer(server, address.port, `http://${address.urlHost}:${address.port}/metrics`);
    }

    async close(): Promise<void> {
        await new Promise<void>((resolve) => {
            this.server.close(() => resolve());
            this.server.closeAllConnections();
        });
    }
}
