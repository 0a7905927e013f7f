/**
 * The part of JSON Schema that structured output can enforce: what node-llama-cpp's schema-to-grammar
 * converter supports (its `GbnfJsonSchema`), plus `anyOf`, which grammars treat as `oneOf` (both are "one
 * of these shapes" to a generator) and which OpenAI-style schemas use for optional fields (Pydantic's
 * `Optional[X]` is `anyOf: [X, {type: null}]`). The converter does not refuse what it does not know — a
 * `pattern` is dropped, an unknown `$ref` or an `anyOf` generates something else — so a schema is checked
 * here first and a keyword that would constrain the output but cannot is refused, naming where it is.
 */
import {isObject, type JsonObject} from "./validation.js";

const primitiveTypes = ["string", "number", "integer", "boolean", "null"];
const stringFormats = ["date-time", "time", "date"];
/** Keywords that only annotate: allowed anywhere, no effect on the output. */
const annotations = new Set(["description", "title", "$schema", "$id", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly"]);
const keywordsByType: Readonly<Record<string, readonly string[]>> = {
    object: ["properties", "additionalProperties", "minProperties", "maxProperties", "required"],
    array: ["items", "prefixItems", "minItems", "maxItems"],
    string: ["minLength", "maxLength", "format"]
};
const supported = "type, const, enum, oneOf/anyOf, $ref to #/$defs/…, $defs, and per type: object properties, required, " +
    "additionalProperties, min/maxProperties; array items, prefixItems, min/maxItems; string min/maxLength, format date, time or date-time";

/**
 * Bounds on a schema's size: node-llama-cpp builds its grammar on the engine's main thread (~40 ms for
 * 1000 properties, ~75 ms for 3000, on the 2-vCPU development VM), stalling every running request meanwhile,
 * and a deep schema would overflow the checker's stack. OpenAI's own limits are 5000 properties and 10 levels.
 */
export const maxSchemaNodes = 5000;
export const maxSchemaDepth = 32;

/** Why `schema` cannot be enforced (with the JSON pointer of the offending place), or undefined when it can. */
export function unsupportedSchemaPart(schema: JsonObject): string | undefined {
    try {
        checkNode(schema, "", new Set(), {nodes: 0, depth: 0});
        return undefined;
    } catch (error) {
        if (error instanceof UnsupportedSchema)
            return error.message;
        throw error;
    }
}

/** `schema` with every `anyOf` written as `oneOf`, for node-llama-cpp's converter (a copy; call after `unsupportedSchemaPart`). */
export function grammarSchema(schema: unknown): unknown {
    if (!isObject(schema))
        return schema;
    const mapValues = (value: unknown): unknown =>
        isObject(value) ? Object.fromEntries(Object.entries(value).map(([name, item]) => [name, grammarSchema(item)])) : value;
    return Object.fromEntries(Object.entries(schema).map(([key, value]) => {
        switch (key) {
            case "anyOf":
            case "oneOf":
            case "prefixItems":
                return [key === "anyOf" ? "oneOf" : key, Array.isArray(value) ? value.map(grammarSchema) : value];
            case "properties":
            case "$defs":
                return [key, mapValues(value)];
            case "items":
            case "additionalProperties":
                return [key, grammarSchema(value)];
            default:
                return [key, value];
        }
    }));
}

class UnsupportedSchema extends Error {}

function refuse(path: string, message: string): never {
    throw new UnsupportedSchema(`at ${path === "" ? "the root" : path}: ${message}`);
}

function isPrimitive(value: unknown): boolean {
    return value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

function checkCount(node: JsonObject, key: string, path: string): void {
    const value = node[key];
    if (value !== undefined && !(typeof value === "number" && Number.isInteger(value) && value >= 0))
        refuse(`${path}/${key}`, `${key} must be an integer ≥ 0`);
}

/** How much of the schema the check has seen: nodes in all, and the depth of the one being checked. */
type Walk = {nodes: number, depth: number};

/** Checks one schema node; `defs`: the names `#/$defs/…` may point to here (node-llama-cpp resolves them in enclosing `$defs`). */
function checkNode(node: unknown, path: string, defs: ReadonlySet<string>, walk: Walk): void {
    if (++walk.nodes > maxSchemaNodes)
        refuse(path, `the schema has more than ${maxSchemaNodes} subschemas`);
    if (walk.depth >= maxSchemaDepth)
        refuse(path, `the schema nests deeper than ${maxSchemaDepth} levels`);
    walk.depth++;
    try {
        checkShape(node, path, defs, walk);
    } finally {
        walk.depth--;
    }
}

function checkShape(node: unknown, path: string, defs: ReadonlySet<string>, walk: Walk): void {
    if (!isObject(node))
        refuse(path, "expected a schema object");
    let inScope = defs;
    if (node.$defs !== undefined) {
        if (!isObject(node.$defs))
            refuse(`${path}/$defs`, "expected an object of schemas");
        inScope = new Set([...defs, ...Object.keys(node.$defs)]);
        for (const [name, def] of Object.entries(node.$defs))
            checkNode(def, `${path}/$defs/${name}`, inScope, walk);
    }
    const shapes = ["type", "const", "enum", "oneOf", "anyOf", "$ref"].filter((key) => node[key] !== undefined);
    if (shapes.length !== 1)
        refuse(path, shapes.length === 0
            ? "a schema must say its type, const, enum, oneOf/anyOf or $ref (an unconstrained value cannot be generated)"
            : `one of type, const, enum, oneOf/anyOf and $ref per schema, got ${shapes.join(", ")}`);
    const shape = shapes[0]!;
    const allowed = new Set([shape, "$defs", ...(shape === "type" && typeof node.type === "string" ? keywordsByType[node.type] ?? [] : [])]);
    for (const key of Object.keys(node))
        if (!allowed.has(key) && !annotations.has(key))
            refuse(`${path}/${key}`, `${key} is not supported${shape === "type" && typeof node.type === "string" ? ` with type ${node.type}` : ""} (supported: ${supported})`);
    switch (shape) {
        case "const":
            if (!isPrimitive(node.const))
                refuse(`${path}/const`, "only a string, number, boolean or null");
            return;
        case "enum":
            if (!Array.isArray(node.enum) || node.enum.length === 0 || !node.enum.every(isPrimitive))
                refuse(`${path}/enum`, "expected a non-empty array of strings, numbers, booleans or nulls");
            return;
        case "oneOf":
        case "anyOf": {
            const options = node[shape];
            if (!Array.isArray(options) || options.length === 0)
                refuse(`${path}/${shape}`, "expected a non-empty array of schemas");
            options.forEach((option, index) => checkNode(option, `${path}/${shape}/${index}`, inScope, walk));
            return;
        }
        case "$ref": {
            const name = typeof node.$ref === "string" ? /^#\/\$defs\/([^/]+)$/.exec(node.$ref)?.[1] : undefined;
            if (name === undefined || !inScope.has(name))
                refuse(`${path}/$ref`, `only references to #/$defs/NAME defined in this schema are supported, got ${JSON.stringify(node.$ref)}`);
            return;
        }
        default:
            checkTyped(node, path, inScope, walk);
    }
}

function checkTyped(node: JsonObject, path: string, defs: ReadonlySet<string>, walk: Walk): void {
    const type = node.type;
    if (Array.isArray(type)) {
        if (type.length === 0 || !type.every((item) => typeof item === "string" && primitiveTypes.includes(item)))
            refuse(`${path}/type`, `a list of types may hold only ${primitiveTypes.join(", ")} (use anyOf for objects and arrays)`);
        return;
    }
    if (typeof type !== "string" || ![...primitiveTypes, "object", "array"].includes(type))
        refuse(`${path}/type`, `expected one of ${[...primitiveTypes, "object", "array"].join(", ")}`);
    if (type === "object") {
        if (node.properties !== undefined) {
            if (!isObject(node.properties))
                refuse(`${path}/properties`, "expected an object of schemas");
            for (const [name, property] of Object.entries(node.properties))
                checkNode(property, `${path}/properties/${name}`, defs, walk);
        }
        if (node.additionalProperties !== undefined && typeof node.additionalProperties !== "boolean")
            checkNode(node.additionalProperties, `${path}/additionalProperties`, defs, walk);
        if (node.required !== undefined && !(Array.isArray(node.required) && node.required.every((name) => typeof name === "string")))
            refuse(`${path}/required`, "expected an array of property names");
        checkCount(node, "minProperties", path);
        checkCount(node, "maxProperties", path);
    } else if (type === "array") {
        if (node.items !== undefined)
            checkNode(node.items, `${path}/items`, defs, walk);
        if (node.prefixItems !== undefined) {
            if (!Array.isArray(node.prefixItems))
                refuse(`${path}/prefixItems`, "expected an array of schemas");
            node.prefixItems.forEach((item, index) => checkNode(item, `${path}/prefixItems/${index}`, defs, walk));
        }
        checkCount(node, "minItems", path);
        checkCount(node, "maxItems", path);
    } else if (type === "string") {
        checkCount(node, "minLength", path);
        checkCount(node, "maxLength", path);
        if (node.format !== undefined && !(typeof node.format === "string" && stringFormats.includes(node.format)))
            refuse(`${path}/format`, `only ${stringFormats.join(", ")}`);
    }
}
