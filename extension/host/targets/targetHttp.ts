/**
 * GETs against a watched server: a timeout, a size cap, the API key as a bearer token, and errors a
 * person can act on ("connection refused", "401: the API key was refused", "timed out after 2 s").
 */
import {errorMessage} from "../../../common/errorMessage.js";
import {isObject} from "../../../protocol/validation.js";

export type TargetGetOptions = {apiKey?: string, timeoutMs?: number, maxBytes?: number};

export type TargetResponse = {status: number, text: string};

/** Why a target could not be read: `unreachable` (no answer), `auth` (401/403), `bad` (an answer we cannot use). */
export class TargetReadError extends Error {
    override readonly name = "TargetReadError";

    constructor(message: string, readonly kind: "unreachable" | "auth" | "bad") {
        super(message);
    }
}

const defaultTimeoutMs = 2000;
const defaultMaxBytes = 8 << 20;

/** Resolves with any HTTP status; rejects with TargetReadError only when no usable answer came. */
export async function targetGet(url: string, options: TargetGetOptions = {}): Promise<TargetResponse> {
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    const headers: Record<string, string> = {Accept: "text/plain, application/json"};
    if (options.apiKey !== undefined && options.apiKey !== "")
        headers.Authorization = `Bearer ${options.apiKey}`;
    let response: Response;
    try {
        response = await fetch(url, {headers, signal: AbortSignal.timeout(timeoutMs), redirect: "error"});
    } catch (error) {
        const cause = (error as {cause?: {code?: unknown}}).cause;
        const code = typeof cause?.code === "string" ? cause.code : undefined;
        const reason = error instanceof Error && error.name === "TimeoutError" ? `no answer within ${timeoutMs} ms`
            : code === "ECONNREFUSED" ? "connection refused"
                : code ?? errorMessage(error);
        throw new TargetReadError(`${url}: ${reason}`, "unreachable");
    }
    if (response.status === 401 || response.status === 403) {
        await response.body?.cancel();
        throw new TargetReadError(`${url}: HTTP ${response.status}, the server wants ${options.apiKey === undefined ? "an API key" : "another API key"}`, "auth");
    }
    const declared = Number(response.headers.get("content-length") ?? "0");
    const maxBytes = options.maxBytes ?? defaultMaxBytes;
    if (declared > maxBytes) {
        await response.body?.cancel();
        throw new TargetReadError(`${url}: the answer is ${declared} bytes, more than ${maxBytes}`, "bad");
    }
    let text: string;
    try {
        text = await response.text();
    } catch (error) {
        throw new TargetReadError(`${url}: the answer broke off (${errorMessage(error)})`, "unreachable");
    }
    if (text.length > maxBytes)
        throw new TargetReadError(`${url}: the answer is longer than ${maxBytes} bytes`, "bad");
    return {status: response.status, text};
}

/** A JSON answer with status 200, or TargetReadError("bad") saying what came instead. */
export async function targetGetJson(url: string, options: TargetGetOptions = {}): Promise<unknown> {
    const response = await targetGet(url, options);
    if (response.status !== 200)
        throw new TargetReadError(`${url}: HTTP ${response.status}`, "bad");
    try {
        return JSON.parse(response.text) as unknown;
    } catch {
        throw new TargetReadError(`${url}: the answer is not JSON`, "bad");
    }
}

/** The first model id of an OpenAI-compatible `/v1/models`, or undefined when there is none to read. */
export async function readModelId(baseUrl: string, options: TargetGetOptions = {}): Promise<string | undefined> {
    return (await readModelAnswer(baseUrl, options)).id;
}

/**
 * `/v1/models`' first model id; `lasting` when there is none and asking again soon would not change
 * that: the server answered, but with 4xx or 501 (it has no such endpoint), a refused key, or a list
 * that names no model. No answer, a timeout or another 5xx may pass.
 */
export async function readModelAnswer(baseUrl: string, options: TargetGetOptions = {}):
Promise<{id: string | undefined, lasting: boolean}> {
    let response: TargetResponse;
    try {
        response = await targetGet(`${baseUrl}/v1/models`, options);
    } catch (error) {
        return {id: undefined, lasting: error instanceof TargetReadError && error.kind !== "unreachable"};
    }
    if (response.status !== 200)
        return {id: undefined, lasting: response.status < 500 || response.status === 501};
    let models: unknown;
    try {
        models = JSON.parse(response.text);
    } catch {
        return {id: undefined, lasting: true};
    }
    const first: unknown = isObject(models) && Array.isArray(models.data) ? models.data[0] : undefined;
    const id = isObject(first) && typeof first.id === "string" ? first.id : undefined;
    return {id, lasting: true};
}
