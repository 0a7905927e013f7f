import type {AddressInfo, Server} from "node:net";

/** A port someone else already listens on, named with its host (and what it was for) so the user knows which setting to change. */
export class PortInUseError extends Error {
    override readonly name = "PortInUseError";

    constructor(readonly port: number, readonly host: string, readonly purpose?: string) {
        super(`${purpose === undefined ? "port" : `${purpose} port`} ${port} on ${host} is already in use`);
    }
}

export type ListenOptions = {
    host: string,
    /** 0 = a free one. */
    port: number,
    /** What the port is for, e.g. "Prometheus" or "dashboard": leads the PortInUseError's message. */
    purpose?: string
};

/** The address a server ended up on, and the host written as a URL needs it ("[::1]"). */
export type ListeningAddress = {host: string, port: number, urlHost: string};

/**
 * Starts `server` (an http.Server, net.Server…) listening; rejects with PortInUseError when the port
 * is taken, with the server's own error otherwise. Resolves to the bound port (the free one when
 * `port` is 0).
 */
export async function listen(server: Server, options: ListenOptions): Promise<ListeningAddress> {
    const {host, port} = options;
    await new Promise<void>((resolve, reject) => {
        const onError = (error: NodeJS.ErrnoException): void => {
            reject(error.code === "EADDRINUSE" ? new PortInUseError(port, host, options.purpose) : error);
        };
        server.once("error", onError);
        server.listen(port, host, () => {
            server.off("error", onError);
            resolve();
        });
    });
    const bound = (server.address() as AddressInfo).port;
    return {host, port: bound, urlHost: host.includes(":") ? `[${host}]` : host};
}
