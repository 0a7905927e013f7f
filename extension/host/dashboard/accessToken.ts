/**
 * The dashboard's per-run access token: made when the server starts, carried in the URL it prints
 * (`?token=…`), required on `/stream` and the exports. Other local processes and users cannot read
 * or reset the stats without it.
 */
import crypto from "node:crypto";

/** The query parameter that carries the token, on the page's URL and on `/stream`. */
export const tokenParameter = "token";

/** 192 random bits, base64url (URL-safe, 32 characters). */
export function makeAccessToken(): string {
    return crypto.randomBytes(24).toString("base64url");
}

/** Whether a request URL (path and query, as in `request.url`) carries `token`, compared in constant time. */
export function requestHasToken(requestUrl: string | undefined, token: string): boolean {
    let given: string | null;
    try {
        given = new URL(requestUrl ?? "/", "http://localhost").searchParams.get(tokenParameter);
    } catch {
        return false;
    }
    if (given === null)
        return false;
    const a = Buffer.from(given, "utf8");
    const b = Buffer.from(token, "utf8");
    return a.length === b.length && crypto.timingSafeEqual(a, b);
}
