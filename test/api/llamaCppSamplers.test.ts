/**
 * llama.cpp's DRY and XTC samplers (`dry_*`, `xtc_*`), on our server and on llama-server with the same real model
 * (stories260K, whose greedy stories repeat whole sentences): at temperature 0 both write the same text with either
 * sampler, on `/completion` and through the official `openai` client on `/v1/completions`; DRY shortens the longest
 * repeated run of tokens; XTC at probability 1 changes the answer, and is off at a threshold above 0.5; bad values are a
 * 400 naming the field. And `logit_bias` in llama.cpp's forms (texts as keys, `[key, bias]` pairs, `false`): the same
 * greedy text as llama-server's.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import OpenAI from "openai";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();
const suite = "llama.cpp's DRY and XTC samplers and logit_bias forms, against llama-server";

type Answer = {content: string, tokens: number[]};

/** The length of the longest run of tokens that occurs twice (overlapping allowed). */
function longestRepeat(tokens: readonly number[]): number {
    let longest = 0;
    for (let length = 1; length < tokens.length; length++) {
        const seen = new Set<string>();
        let repeated = false;
        for (let i = 0; i + length <= tokens.length && !repeated; i++) {
            const key = tokens.slice(i, i + length).join(",");
            repeated = seen.has(key);
            seen.add(key);
        }
        if (!repeated)
            break;
        longest = length;
    }
    return longest;
}

describe(suite, {skip: llamaServerSkipReason(suite) || skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    const api = apiForSuite({modelPath: stories.path ?? "", contextSize: 1024, parallel: 1});
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: stories.path ?? "",
            args: ["-t", "1", "-np", "1", "-c", "1024", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    async function complete(origin: string, body: Record<string, unknown>): Promise<Answer> {
        const response = await fetch(`${origin}/completion`, {method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({n_predict: 160, temperature: 0, min_p: 0.05, ignore_eos: true, return_tokens: true, ...body})});
        const text = await response.text();
        assert.equal(response.status, 200, `${origin}: ${text}`);
        return JSON.parse(text) as Answer;
    }

    test("DRY: the same text as llama-server's, with shorter repeats than without it", async () => {
        for (const prompt of ["Once upon a time", "Lily", "The cat"]) {
            const greedy = await complete(ours(), {prompt});
            for (const dry of [{dry_multiplier: 0.8}, {dry_multiplier: 2, dry_allowed_length: 3, dry_base: 1.5}]) {
                const mine = await complete(ours(), {prompt, ...dry});
                assert.equal(mine.content, (await complete(peer!.origin, {prompt, ...dry})).content, `${prompt} ${JSON.stringify(dry)}`);
                assert.ok(longestRepeat(mine.tokens) < longestRepeat(greedy.tokens),
                    `${prompt}: longest repeat ${longestRepeat(mine.tokens)} with DRY, ${longestRepeat(greedy.tokens)} without`);
            }
        }
        // The OpenAI endpoint reads the same fields, as llama-server's does.
        const openai = await api.openai.completions.create({model: "m", prompt: "Lily", max_tokens: 160, temperature: 0, min_p: 0.05,
            ignore_eos: true, dry_multiplier: 0.8} as OpenAI.CompletionCreateParamsNonStreaming);
        assert.equal(openai.choices[0]!.text, (await complete(peer!.origin, {prompt: "Lily", dry_multiplier: 0.8})).content);
    });

    test("XTC: the same text as llama-server's at temperature 0; off at probability 0 or a threshold above 0.5", async () => {
        for (const prompt of ["Once upon a time", "Lily", "The cat"]) {
            const greedy = (await complete(ours(), {prompt})).content;
            const xtc = {xtc_probability: 1, xtc_threshold: 0.1};
            const mine = (await complete(ours(), {prompt, ...xtc})).content;
            assert.notEqual(mine, greedy, `${prompt}: XTC removes the top choices`);
            assert.equal(mine, (await complete(peer!.origin, {prompt, ...xtc})).content, prompt);
            assert.equal((await complete(ours(), {prompt, xtc_probability: 1, xtc_threshold: 0.6})).content, greedy);
            assert.equal((await complete(ours(), {prompt, xtc_probability: 0, xtc_threshold: 0.1})).content, greedy);
        }
    });

    test("logit_bias keyed by text, as [key, bias] pairs, with false: the same greedy text as llama-server's", async () => {
        const prompt = "Once upon a time";
        const greedy = (await complete(ours(), {prompt, n_predict: 48})).content;
        assert.match(greedy, /Lily/, "the greedy story names Lily");
        for (const logitBias of [{Lily: false}, [["Lily", false]], [[" named", -100], ["Lily", -5]], {"little girl": -100}, [["Lily", -3], ["Lily", -3]]]) {
            const body = {prompt, n_predict: 48, logit_bias: logitBias};
            const mine = (await complete(ours(), body)).content;
            assert.equal(mine, (await complete(peer!.origin, body)).content, JSON.stringify(logitBias));
            if (JSON.stringify(logitBias).includes("false"))
                assert.doesNotMatch(mine, /Lily/, JSON.stringify(logitBias));
        }
        const banned = await api.openai.completions.create({model: "m", prompt, max_tokens: 48, temperature: 0,
            logit_bias: {Lily: -100} as unknown as Record<string, number>});
        assert.equal(banned.choices[0]!.text, (await complete(peer!.origin, {prompt, n_predict: 48, logit_bias: {Lily: -100}})).content,
            "the OpenAI endpoint takes them as llama-server's does");
    });

    test("bad values: a 400 naming the field", async () => {
        const cases: Array<[Record<string, unknown>, string]> = [
            [{dry_multiplier: -1}, "dry_multiplier"],
            [{dry_multiplier: 0.8, dry_allowed_length: 1.5}, "dry_allowed_length"],
            [{dry_multiplier: 0.8, dry_penalty_last_n: -2}, "dry_penalty_last_n"],
            [{dry_multiplier: 0.8, dry_sequence_breakers: []}, "dry_sequence_breakers"],
            [{dry_multiplier: 0.8, dry_sequence_breakers: "\n"}, "dry_sequence_breakers"],
            [{xtc_probability: 1.5}, "xtc_probability"],
            [{xtc_probability: 0.5, xtc_threshold: -0.1}, "xtc_threshold"],
            [{logit_bias: [[1, 2, 3]]}, "logit_bias"],
            [{logit_bias: {Lily: true}}, "logit_bias"],
            [{logit_bias: [[-1, 2]]}, "logit_bias"]
        ];
        for (const [extra, param] of cases) {
            const response = await fetch(`${ours()}/completion`, {method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({prompt: "Lily", n_predict: 4, ...extra})});
            assert.equal(response.status, 400, JSON.stringify(extra));
            const body = await response.json() as {error: {param?: string, message: string}};
            assert.match(body.error.message, new RegExp(param), JSON.stringify(extra));
        }
    });
});
