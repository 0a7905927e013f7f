/**
 * Structured output through the official `openai` client on a real engine: `response_format` json_object
 * and json_schema sample under a grammar, so even the random-weight test model writes JSON that parses
 * and fits the schema (without the grammar it writes anything), streamed or not; schemas the grammar
 * cannot enforce are refused naming where.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import OpenAI from "openai";
import {apiForSuite} from "../helpers/apiUnderTest.js";

type Params = OpenAI.ChatCompletionCreateParamsNonStreaming;

/** A Pydantic-style schema whose every value is constrained (the random model fills free strings forever). */
const answerSchema = {
    title: "Answer", type: "object", additionalProperties: false, required: ["color", "ok", "note"],
    properties: {
        color: {enum: ["red", "green", "blue"]},
        ok: {type: "boolean"},
        note: {anyOf: [{type: "null"}, {const: "none"}]}
    }
};

describe("OpenAI-compatible endpoint: response_format", () => {
    const api = apiForSuite({mode: "inProcess"});

    const ask = (seed: number, extra: Partial<Params> = {}): Params =>
        ({model: "m", messages: [{role: "user", content: "Describe the sky as JSON"}], max_tokens: 120, seed, ...extra});

    test("json_schema: every answer parses and fits the schema, ending by itself; without it the text is not JSON", async () => {
        const responseFormat = {type: "json_schema", json_schema: {name: "answer", schema: answerSchema}} as const;
        for (const seed of [1, 2, 3, 4]) {
            const completion = await api.openai.chat.completions.create(ask(seed, {response_format: responseFormat}));
            const text = completion.choices[0]!.message.content ?? "";
            assert.equal(completion.choices[0]!.finish_reason, "stop", text);
            const value = JSON.parse(text) as {color: unknown, ok: unknown, note: unknown};
            assert.deepEqual(Object.keys(value).sort(), ["color", "note", "ok"], text);
            assert.ok(["red", "green", "blue"].includes(value.color as string), text);
            assert.equal(typeof value.ok, "boolean", text);
            assert.ok(value.note === null || value.note === "none", text);
            assert.ok(!text.endsWith("\n\n\n\n"), "the blank-line stop is not output");
        }
        const free = (await api.openai.chat.completions.create(ask(1))).choices[0]!.message.content ?? "";
        assert.throws(() => JSON.parse(free) as unknown, `plain sampling wrote JSON by chance: ${free}`);
    });

    test("json_schema streamed: the deltas concatenate to the same kind of JSON", async () => {
        const stream = await api.openai.chat.completions.create({...ask(7, {response_format: {type: "json_schema", json_schema: {name: "a", schema: answerSchema}}}),
            stream: true});
        let text = "";
        for await (const chunk of stream)
            text += chunk.choices[0]?.delta.content ?? "";
        const value = JSON.parse(text) as {color: unknown};
        assert.ok(["red", "green", "blue"].includes(value.color as string), text);
    });

    test("json_object: the text is a JSON object from its first character", async () => {
        for (const seed of [1, 2]) {
            const completion = await api.openai.chat.completions.create(ask(seed, {response_format: {type: "json_object"}, max_tokens: 40}));
            const text = completion.choices[0]!.message.content ?? "";
            assert.match(text, /^\{\s*("|\})/, text);
            if (completion.choices[0]!.finish_reason === "stop")
                assert.equal(typeof JSON.parse(text), "object");
        }
        // `text` is the default: the same as no response_format.
        assert.equal((await api.openai.chat.completions.create(ask(3, {response_format: {type: "text"}}))).choices[0]!.message.content,
            (await api.openai.chat.completions.create(ask(3))).choices[0]!.message.content);
    });

    test("refused: an unknown type, a missing schema, keywords the grammar cannot enforce (400 naming where)", async () => {
        const cases: Array<[unknown, string, RegExp]> = [
            [{type: "yaml"}, "response_format.type", /expected text, json_object or json_schema, got "yaml"/],
            [{type: "json_schema", json_schema: {name: "x"}}, "response_format.json_schema", /schema/],
            [{type: "json_schema", json_schema: {name: "x", schema: {type: "object", properties: {id: {type: "string", pattern: "^[a-z]+$"}}}}},
                "response_format.json_schema.schema", /at \/properties\/id\/pattern: pattern is not supported/],
            [{type: "json_schema", json_schema: {name: "x", schema: {$ref: "#/$defs/Missing"}}}, "response_format.json_schema.schema", /\$defs/]
        ];
        for (const [format, param, message] of cases)
            await assert.rejects(api.openai.chat.completions.create(ask(1, {response_format: format as Params["response_format"]})), (error: unknown) => {
                assert.ok(error instanceof OpenAI.BadRequestError, String(error));
                assert.equal(error.param, param);
                assert.match(error.message, message);
                return true;
            });
        // Past the API the engine checks again.
        const direct = await api.client.generate({prompt: "Hi", maxTokens: 4, responseFormat: {type: "json_schema", schema: {type: "string", pattern: "a"}}}).done;
        assert.equal(direct.errorCode, "invalid_request");
        assert.match(direct.error ?? "", /^responseFormat: this schema cannot be enforced at \/pattern/);
    });
});
