/**
 * Which JSON schemas structured output can enforce: node-llama-cpp's converter drops or misreads what it
 * does not support (a `pattern` vanishes, an `anyOf` becomes `null`), so those are refused up front.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import {grammarSchema, unsupportedSchemaPart} from "../../protocol/jsonSchemaSubset.js";
import type {JsonObject} from "../../protocol/validation.js";

test("schemas within the subset pass, Pydantic's shapes included ($defs, $ref, anyOf with null, titles)", () => {
    const pydantic: JsonObject = {
        title: "Answer", type: "object", additionalProperties: false, required: ["city", "when", "tags", "pet"],
        $defs: {Pet: {title: "Pet", type: "object", properties: {name: {type: "string", maxLength: 20}}, required: ["name"]}},
        properties: {
            city: {enum: ["Paris", "Rome"], description: "where"},
            when: {anyOf: [{type: "string", format: "date"}, {type: "null"}], default: null},
            tags: {type: "array", items: {type: "string"}, minItems: 1, maxItems: 3},
            pet: {$ref: "#/$defs/Pet"},
            score: {type: ["number", "null"]},
            pair: {type: "array", prefixItems: [{const: 1}, {type: "boolean"}]}
        }
    };
    assert.equal(unsupportedSchemaPart(pydantic), undefined);
    assert.equal(unsupportedSchemaPart({type: "object", additionalProperties: {type: "integer"}, minProperties: 1}), undefined);
});

test("what cannot be enforced is refused with its place", () => {
    const refused: Array<[JsonObject, RegExp]> = [
        [{type: "string", pattern: "^a+$"}, /at \/pattern: pattern is not supported with type string/],
        [{type: "object", properties: {n: {type: "integer", minimum: 3}}}, /at \/properties\/n\/minimum: minimum is not supported with type integer/],
        [{allOf: [{type: "string"}]}, /at the root: a schema must say its type/],
        [{}, /an unconstrained value cannot be generated/],
        [{type: "object", properties: {a: {}}}, /at \/properties\/a: a schema must say/],
        [{$ref: "#/$defs/Missing"}, /at \/\$ref: only references to #\/\$defs\/NAME defined in this schema/],
        [{$ref: "#/definitions/A", definitions: {A: {type: "string"}}}, /at \/definitions: definitions is not supported/],
        [{type: ["object", "null"]}, /use anyOf for objects and arrays/],
        [{type: "date"}, /at \/type: expected one of/],
        [{type: "string", format: "email"}, /at \/format: only date-time, time, date/],
        [{type: "string", enum: ["a"]}, /one of type, const, enum, oneOf\/anyOf and \$ref per schema, got type, enum/],
        [{enum: []}, /non-empty array/],
        [{const: {a: 1}}, /only a string, number, boolean or null/],
        [{type: "array", items: {type: "string", pattern: "x"}, minItems: -1}, /at \/items\/pattern/],
        [{type: "array", minItems: 1.5}, /minItems must be an integer ≥ 0/],
        [{anyOf: [{type: "string"}, {not: {type: "null"}}]}, /at \/anyOf\/1: a schema must say/]
    ];
    for (const [schema, message] of refused)
        assert.match(unsupportedSchemaPart(schema) ?? "accepted", message, JSON.stringify(schema));
});

test("bounded: at most 5000 subschemas and 32 levels (the engine builds the grammar on its main thread)", () => {
    const wide = (n: number): JsonObject => ({type: "object", properties: Object.fromEntries(Array.from({length: n}, (_, i) => [`p${i}`, {type: "integer"}]))});
    assert.equal(unsupportedSchemaPart(wide(4999)), undefined);
    assert.match(unsupportedSchemaPart(wide(5000)) ?? "accepted", /at \/properties\/p4999: the schema has more than 5000 subschemas/);
    const deep = (levels: number): JsonObject => {
        let schema: JsonObject = {type: "string"};
        for (let i = 1; i < levels; i++)
            schema = {type: "array", items: schema};
        return schema;
    };
    assert.equal(unsupportedSchemaPart(deep(32)), undefined);
    assert.match(unsupportedSchemaPart(deep(33)) ?? "accepted", /nests deeper than 32 levels/);
    // Far deeper than any stack: refused at level 33, not a crash.
    assert.match(unsupportedSchemaPart(deep(100_000)) ?? "accepted", /nests deeper than 32 levels/);
});

test("grammarSchema writes anyOf as oneOf at every depth, leaving values (enum, const, required) alone", () => {
    const schema = {type: "object", required: ["anyOf"], properties: {anyOf: {anyOf: [{enum: ["anyOf"]}, {type: "array", items: {anyOf: [{const: "anyOf"}]}}]}}};
    assert.deepEqual(grammarSchema(schema), {type: "object", required: ["anyOf"],
        properties: {anyOf: {oneOf: [{enum: ["anyOf"]}, {type: "array", items: {oneOf: [{const: "anyOf"}]}}]}}});
});
