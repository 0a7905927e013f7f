/**
 * Reading an OpenAI-style request body: a bad field is an ApiRequestError that names it (OpenAI's error
 * shape, `param` = the field), answered with its status by the server.
 */
import type {JsonObject} from "./validation.js";

/** A request the API refuses: OpenAI's error shape, with the offending field in `param`. */
export class ApiRequestError extends Error {
    override readonly name = "ApiRequestError";

    constructor(message: string, readonly param: string | null, readonly status = 400,
        readonly type = "invalid_request_error", readonly code: string | null = null) {
        super(message);
    }
}

/** OpenAI's error body. */
export type ApiErrorBody = {error: {message: string, type: string, param: string | null, code: string | null}};

export function apiErrorBody(error: ApiRequestError): ApiErrorBody {
    return {error: {message: error.message, type: error.type, param: error.param, code: error.code}};
}

export function fail(param: string, message: string): never {
    throw new ApiRequestError(`${param}: ${message}`, param);
}

export function optionalNumberField(body: JsonObject, key: string, min: number, max: number, integer: boolean): number | undefined {
    const value = body[key];
    if (value === undefined || value === null)
        return undefined;
    if (typeof value !== "number" || !Number.isFinite(value) || (integer && !Number.isInteger(value)))
        fail(key, `expected ${integer ? "an integer" : "a number"}`);
    if (value < min || value > max)
        fail(key, `must be between ${min} and ${max}, got ${value}`);
    return value;
}

export function optionalBooleanField(body: JsonObject, key: string): boolean | undefined {
    const value = body[key];
    if (value === undefined || value === null)
        return undefined;
    if (typeof value !== "boolean")
        fail(key, "expected a boolean");
    return value;
}

export function optionalStringField(body: JsonObject, key: string): string | undefined {
    const value = body[key];
    if (value === undefined || value === null)
        return undefined;
    if (typeof value !== "string")
        fail(key, "expected a string");
    return value;
}

/** A non-empty list of token ids (integers ≥ 0; whether the model has them is the engine's check), named `param` in errors. */
export function tokenIdsField(list: readonly unknown[], param: string): number[] {
    if (list.length === 0)
        fail(param, "expected at least one token id");
    return list.map((token, index) => {
        if (typeof token !== "number" || !Number.isSafeInteger(token) || token < 0)
            fail(`${param}[${index}]`, "expected a token id (an integer ≥ 0)");
        return token;
    });
}
