/** Host-header and Origin checks shared by every server the host runs (DNS rebinding, cross-site pages). */

const loopbackNames = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** Whether a bind address only listens on this machine. */
export function isLoopbackAddress(host: string): boolean {
    return loopbackNames.has(host.toLowerCase()) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Whether a request's `Host` header is acceptable for a server bound to `boundHost`:`port`. A
 * loopback bind answers only to loopback names on its own port (a DNS-rebinding page has a foreign
 * name); any other bind answers to any name (it is reachable under names this server cannot know).
 */
export function allowedHostHeader(hostHeader: string | undefined, boundHost: string, port: number): boolean {
    if (!isLoopbackAddress(boundHost))
        return true;
    if (hostHeader === undefined)
        return false;
    const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hostHeader);
    return match !== null && isLoopbackAddress(match[1]!) && Number(match[2] ?? 80) === port;
}

/**
 * Whether a browser `Origin` may talk to this server: no Origin (not a browser page: SDKs, curl,
 * the extension host), the server's own origin (its dashboard page), or one allow-listed exactly.
 */
export function allowedOrigin(origin: string | undefined, hostHeader: string | undefined, allowList: readonly string[] = []): boolean {
    if (origin === undefined)
        return true;
    if (hostHeader !== undefined && origin === `http://${hostHeader}`)
        return true;
    return allowList.includes(origin);
}
