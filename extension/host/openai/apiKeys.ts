import {createHash, timingSafeEqual} from "node:crypto";

/** An accepted API key; requests made with a named key are labelled with its name in the stats. */
export type ApiKey = {key: string, name?: string};

/** `--api-key KEY` or `--api-key NAME=KEY` (the name labels that key's requests, e.g. `continue=sk-…`). */
export function parseApiKey(value: string): ApiKey {
    const match = /^([A-Za-z0-9._ -]{1,64})=(.+)$/.exec(value);
    if (match !== null)
        return {name: match[1]!, key: match[2]!};
    return {key: value};
}

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/**
 * Checks `Authorization: Bearer KEY` against the accepted keys in constant time: every key is
 * compared (as SHA-256 digests, so lengths never leak) whatever matched.
 */
export class ApiKeyCheck {
    private readonly digests: Array<{digest: Buffer, name: string | undefined}>;

    constructor(keys: readonly ApiKey[]) {
        this.digests = keys.map((key) => ({digest: digest(key.key), name: key.name}));
    }

    get required(): boolean {
        return this.digests.length > 0;
    }

    /**
     * The matching key (its name may be undefined), or undefined when the request carries no accepted key: as
     * `Authorization: Bearer KEY`, or (Anthropic's clients) `x-api-key: KEY`.
     */
    check(authorization: string | undefined, xApiKey?: string): {name: string | undefined} | undefined {
        const presented = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? "")?.[1] ?? (xApiKey?.trim() || undefined);
        const candidate = digest(presented ?? "");
        let found: {name: string | undefined} | undefined;
        for (const key of this.digests)
            if (timingSafeEqual(candidate, key.digest) && presented !== undefined)
                found ??= {name: key.name};
        return found;
    }
}
