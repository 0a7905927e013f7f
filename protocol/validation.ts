/**
 * Tiny, allocation-light validators for messages that cross a process, thread or socket boundary.
 * Every boundary message is validated on arrival with these; a failure throws {@link ProtocolError},
 * which receivers count and report instead of crashing.
 */

export class ProtocolError extends Error {
    override readonly name = "ProtocolError";
}

export type JsonObject = {[key: string]: unknown};

export function isObject(value: unknown): value is JsonObject {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function expectObject(value: unknown, what: string): JsonObject {
    if (!isObject(value))
        throw new ProtocolError(`${what}: expected an object`);
    return value;
}

export function expectString(obj: JsonObject, key: string, what: string, maxLength = 1 << 20): string {
    const value = obj[key];
    if (typeof value !== "string")
        throw new ProtocolError(`${what}.${key}: expected a string`);
    if (value.length > maxLength)
        throw new ProtocolError(`${what}.${key}: longer than ${maxLength} characters`);
    return value;
}

export function optionalString(obj: JsonObject, key: string, what: string, maxLength = 1 << 20): string | undefined {
    return obj[key] === undefined ? undefined : expectString(obj, key, what, maxLength);
}

export function expectNumber(obj: JsonObject, key: string, what: string): number {
    const value = obj[key];
    if (typeof value !== "number" || !Number.isFinite(value))
        throw new ProtocolError(`${what}.${key}: expected a finite number`);
    return value;
}

export function optionalNumber(obj: JsonObject, key: string, what: string): number | undefined {
    return obj[key] === undefined ? undefined : expectNumber(obj, key, what);
}

export function expectInteger(obj: JsonObject, key: string, what: string): number {
    const value = expectNumber(obj, key, what);
    if (!Number.isInteger(value))
        throw new ProtocolError(`${what}.${key}: expected an integer`);
    return value;
}

export function optionalInteger(obj: JsonObject, key: string, what: string): number | undefined {
    return obj[key] === undefined ? undefined : expectInteger(obj, key, what);
}

export function expectBoolean(obj: JsonObject, key: string, what: string): boolean {
    const value = obj[key];
    if (typeof value !== "boolean")
        throw new ProtocolError(`${what}.${key}: expected a boolean`);
    return value;
}

export function optionalBoolean(obj: JsonObject, key: string, what: string): boolean | undefined {
    const value = obj[key];
    if (value === undefined)
        return undefined;
    if (typeof value !== "boolean")
        throw new ProtocolError(`${what}.${key}: expected a boolean`);
    return value;
}

export function expectOneOf<const T extends string>(obj: JsonObject, key: string, allowed: readonly T[], what: string): T {
    const value = obj[key];
    if (typeof value !== "string" || !(allowed as readonly string[]).includes(value))
        throw new ProtocolError(`${what}.${key}: expected one of ${allowed.join(", ")}`);
    return value as T;
}

export function expectArray(obj: JsonObject, key: string, what: string, maxLength = 1 << 20): unknown[] {
    const value = obj[key];
    if (!Array.isArray(value))
        throw new ProtocolError(`${what}.${key}: expected an array`);
    if (value.length > maxLength)
        throw new ProtocolError(`${what}.${key}: more than ${maxLength} items`);
    return value;
}

export function expectNumberArray(obj: JsonObject, key: string, what: string): number[] {
    const value = expectArray(obj, key, what);
    for (const item of value)
        if (typeof item !== "number" || !Number.isFinite(item))
            throw new ProtocolError(`${what}.${key}: expected an array of finite numbers`);
    return value as number[];
}

/** Whether `value` is one of `allowed` (for settings and options read from untyped sources). */
export function isOneOf<const T extends string>(value: unknown, allowed: readonly T[]): value is T {
    return typeof value === "string" && (allowed as readonly string[]).includes(value);
}
