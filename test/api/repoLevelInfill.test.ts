/**
 * `/infill` on a model with Qwen2.5-Coder's repository-level tokens (`<|repo_name|>`, `<|file_sep|>`), against llama-server
 * on the same file: other files' code goes in llama.cpp's repo-level pattern (the repository token and "myproject", each
 * file behind the file separator and its name, then the file being edited), not behind snippet separators. The same
 * prompt tokens and the same greedy token as llama-server, for llama.vscode's requests with and without other files,
 * named and unnamed, and other files over what the context leaves.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

type Answer = {content: string, tokens_evaluated: number, stop_type: string};

async function answer(origin: string, body: unknown): Promise<Answer> {
    const response = await fetch(`${origin}/infill`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    const json = await response.json() as Answer;
    assert.equal(response.status, 200, `${origin}/infill: ${JSON.stringify(json)}`);
    return json;
}

const suite = "/infill with repository-level FIM tokens, against llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: "repo"});
    const api = apiForSuite(async () => ({modelPath: await modelPath(), contextSize: 1024, parallel: 1}));
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    let peer: LlamaServer;

    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(),
            args: ["-t", "1", "-np", "1", "-c", "1024", "-b", "512", "-n", "1", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });

    test("other files in the repo-level pattern: llama-server's prompt tokens and greedy token", async () => {
        const lines = (n: number, label: string): string => Array.from({length: n}, (_, i) => `    ${label}_${i} = compute(${i})\n`).join("");
        const base = {input_prefix: "def add(a, b):\n", input_suffix: "\n    return result\n", prompt: "    result = "};
        const cases = [
            base,
            {...base, input_extra: [{filename: "util.py", text: "def helper():\n    pass\n"}]},
            // An unnamed file: llama-server names it "tmp".
            {...base, input_extra: [{filename: "util.py", text: "def helper():\n    pass\n"}, {text: "x = 1\n"}]},
            // Over what the context leaves (1024 − a batch of 512 − 2 × n_predict): the end is kept.
            {...base, input_extra: Array.from({length: 12}, (_, i) => ({filename: `m${i}.py`, text: lines(6, `m${i}`)}))}
        ];
        const evaluated: number[] = [];
        for (const [index, body] of cases.entries()) {
            // After the first case a plain token is forced: the greedy one may be a byte of a character, which llama-server's parser refuses.
            const request = {...body, n_predict: 1, temperature: 0, ...index > 0 ? {logit_bias: {300: 100}} : {}};
            const [mine, theirs] = await Promise.all([answer(ours(), request), answer(peer.origin, request)]);
            assert.equal(mine.tokens_evaluated, theirs.tokens_evaluated, JSON.stringify(body).slice(0, 120));
            assert.equal(mine.content, theirs.content, "the same greedy token after the same prompt");
            evaluated.push(mine.tokens_evaluated);
        }
        assert.ok(evaluated[3]! > 510 && evaluated[3]! < 560, `other files cut to 510 tokens: ${evaluated[3]} in all`);
    });

    test("each other file costs its separator, its name line and its text; the snippet-separator model's prompt is another", async () => {
        assert.notEqual(await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: true}), await modelPath(),
            "its own cache file");
        const body = {input_prefix: "x", input_suffix: "y", prompt: "", n_predict: 1, temperature: 0,
            input_extra: [{filename: "a.py", text: "a = 1\n"}, {filename: "b.py", text: "b = 2\n"}]};
        const withFiles = await answer(ours(), body);
        const without = await answer(ours(), {...body, input_extra: []});
        // Per file: the separator, the file name and its newline, the text (behind snippet separators: the separator
        // line and no name). Once, with or without files: the repository token, "myproject\n", the edited
        // file's separator and "filename\n".
        const tokens = async (text: string): Promise<number> => ((await (await fetch(`${ours()}/tokenize`, {method: "POST",
            body: JSON.stringify({content: text, add_special: false})})).json()) as {tokens: number[]}).tokens.length;
        const perFile = 1 + await tokens("a.py\n") + await tokens("a = 1\n") + 1 + await tokens("b.py\n") + await tokens("b = 2\n");
        assert.equal(withFiles.tokens_evaluated - without.tokens_evaluated, perFile);
    });
});
