/**
 * llama.cpp's server's own `/completion` and `/infill` (what llama.vscode sends for code completion), against
 * llama-server on the same model file with FIM tokens: the same prompt tokens for the same request — the cursor's line,
 * other files' code behind snippet separators, a prefix and a suffix cut to one batch as llama-server cuts them —, the
 * same greedy text, `n_indent` ending at the same place; streamed pieces adding up to the whole; `t_max_predict_ms`;
 * `n_predict: 0` leaving the prompt in the prefix cache; refusals naming their field. And `/infill` on a model with
 * Qwen2.5-Coder's repository-level tokens: other files in llama.cpp's repo-level pattern (the repository token and
 * "myproject", each file behind the file separator and its name, then the file being edited), as llama-server builds it.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {ensureDemoModel} from "../../engine/model/demoModel.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {testCacheDir} from "../helpers/testModels.js";

type Answer = Record<string, unknown> & {content: string, tokens_evaluated: number, tokens_predicted: number, stop_type: string,
    timings: Record<string, number>};

async function post(origin: string, path: string, body: unknown): Promise<{status: number, json: Answer}> {
    const response = await fetch(`${origin}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    return {status: response.status, json: await response.json() as Answer};
}

async function answer(origin: string, path: string, body: unknown): Promise<Answer> {
    const {status, json} = await post(origin, path, body);
    assert.equal(status, 200, `${origin}${path}: ${JSON.stringify(json)}`);
    return json;
}

/**
 * In the current suite: our server and llama-server on the same tiny demo model with FIM tokens (`fillInMiddle`: "repo"
 * adds the repository-level ones), one sequence, a 1024-token context, batches of 512. `ours()`: our origin.
 */
function serversOnFimModel(fillInMiddle: true | "repo"): {ours: () => string, peer: () => LlamaServer} {
    const modelPath = (): Promise<string> => ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle});
    const api = apiForSuite(async () => ({modelPath: await modelPath(), contextSize: 1024, parallel: 1}));
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: await modelPath(),
            // `-n 1`: llama-server keeps room for its own -n when other files fill the context; ours for the request's n_predict (1 here).
            args: ["-t", "1", "-np", "1", "-c", "1024", "-b", "512", "-n", "1", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    return {ours: () => api.openai.baseURL.replace(/\/v1$/, ""), peer: () => peer!};
}

/** llama.vscode's /infill requests: without and with other files, some unnamed, and more of them than the context leaves. */
function infillCases(): Array<Record<string, unknown>> {
    const lines = (n: number, label: string): string => Array.from({length: n}, (_, i) => `    ${label}_${i} = compute(${i})\n`).join("");
    const base = {input_prefix: "def add(a, b):\n", input_suffix: "\n    return result\n", prompt: "    result = "};
    return [
        base,
        {...base, input_extra: [{filename: "util.py", text: "def helper():\n    pass\n"}, {text: "x = 1\n"}]},
        // ~1400 and ~700 tokens: the prefix keeps its last 384, the suffix its first 128 less the cursor line and 2.
        {input_prefix: `def long():\n${lines(120, "a")}`, input_suffix: `\n${lines(60, "b")}`, prompt: "    c = "},
        // Other files over what the context leaves (1024 − a batch of 512 − 2 × n_predict): their end is kept.
        {input_prefix: "def add(a, b):\n", input_suffix: "\n", prompt: "    ",
            input_extra: Array.from({length: 12}, (_, i) => ({filename: `m${i}.py`, text: lines(6, `m${i}`)}))}
    ];
}

/** Each case on both servers, one greedy token: the same prompt token count and the same token. */
async function sameInfillAsLlamaServer(ours: string, peer: string, cases: ReadonlyArray<Record<string, unknown>>): Promise<number[]> {
    const evaluated: number[] = [];
    for (const [index, body] of cases.entries()) {
        // After the first case a plain token is forced: the greedy one may be a byte of a character, which llama-server's parser refuses.
        const request = {...body, n_predict: 1, temperature: 0, ...index > 0 ? {logit_bias: {300: 100}} : {}};
        const [mine, theirs] = await Promise.all([answer(ours, "/infill", request), answer(peer, "/infill", request)]);
        assert.equal(mine.tokens_evaluated, theirs.tokens_evaluated, JSON.stringify(body).slice(0, 120));
        assert.equal(mine.content, theirs.content, "the same greedy token after the same prompt");
        assert.equal(mine.stop_type, "limit");
        evaluated.push(mine.tokens_evaluated);
    }
    return evaluated;
}

const suite = "llama.cpp's /completion and /infill, against llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite)}, () => {
    const servers = serversOnFimModel(true);
    const ours = servers.ours;
    const peer = {get origin(): string {
        return servers.peer().origin;
    }};

    /** Both servers' answers; one generated token (llama-server fails a text its content parser does not take, which random weights soon write). */
    async function both(path: string, body: Record<string, unknown>): Promise<[Answer, Answer]> {
        return await Promise.all([answer(ours(), path, body), answer(peer.origin, path, body)]);
    }

    test("/infill: the prompt llama-server evaluates — cursor line, other files' code, prefix and suffix cut to a batch — and its greedy token", async () => {
        const cases = infillCases();
        const evaluated = await sameInfillAsLlamaServer(ours(), peer.origin, cases);
        assert.ok(evaluated[2]! < 600, `cut to a batch: ${evaluated[2]} tokens`);
        assert.ok(evaluated[3]! > 510 && evaluated[3]! < 560, `other files cut to 510 tokens: ${evaluated[3]} in all`);
    });

    test("/completion: text and token-id prompts as llama-server counts them; streamed pieces add up to the whole, the last event has the totals", async () => {
        const ids = ((await answer(peer.origin, "/tokenize", {content: "Once upon a time", add_special: true})).tokens as number[]);
        for (const prompt of ["Once upon a time", ids]) {
            const [mine, theirs] = await both("/completion", {prompt, n_predict: 1, temperature: 0});
            assert.equal(mine.tokens_evaluated, theirs.tokens_evaluated, JSON.stringify(prompt));
            assert.equal(mine.content, theirs.content);
        }
        const body = {prompt: "Once upon a time", n_predict: 12, temperature: 0, ignore_eos: true};
        const whole = await answer(ours(), "/completion", body);
        assert.equal(whole.tokens_predicted, 12);
        assert.equal(whole.stop, true);
        assert.equal(whole.timings.predicted_n, 12);
        const theirs = await answer(peer.origin, "/completion", {...body, n_predict: 1});
        assert.equal((await answer(ours(), "/completion", {...body, n_predict: 1})).tokens_cached, theirs.tokens_cached,
            "the KV cache holds the prompt and the generated tokens but the last, as llama-server counts it");
        const response = await fetch(`${ours()}/completion`, {method: "POST", body: JSON.stringify({...body, stream: true})});
        const events = (await response.text()).split("\n\n").filter((part) => part.startsWith("data: "))
            .map((part) => JSON.parse(part.slice("data: ".length)) as Answer);
        const last = events.at(-1)!;
        assert.equal(last.stop, true);
        assert.equal(last.tokens_predicted, 12);
        assert.ok(events.slice(0, -1).every((event) => event.stop === false));
        assert.equal(events.map((event) => event.content).join(""), whole.content);
    });

    test("n_indent ends where llama-server ends (a line indented less); t_max_predict_ms ends at a newline after the time", async () => {
        // Newlines forced: the second line starts with a newline, at indentation 0 < 1.
        const newlines = {prompt: "Once upon a time", n_predict: 8, temperature: 0, logit_bias: {13: 100}};
        const [mine, theirs] = await both("/completion", {...newlines, n_indent: 1});
        assert.equal(mine.content, theirs.content);
        assert.equal(mine.content, "\n");
        assert.equal(mine.stop_type, "limit");
        assert.ok(mine.tokens_predicted <= theirs.tokens_predicted, "llama-server notices a token later");
        const timed = await answer(ours(), "/completion", {...newlines, n_predict: 400, t_max_predict_ms: 5});
        assert.equal(timed.stop_type, "limit");
        assert.ok(timed.tokens_predicted < 400 && timed.timings.predicted_ms >= 5, JSON.stringify(timed.timings));
    });

    test("n_predict 0 evaluates the prompt only, into the prefix cache (llama.vscode's warm-up); its next request reuses it", async () => {
        const body = {input_prefix: "class Greeter:\n", input_suffix: "\n", prompt: "    def ", input_extra: [{filename: "a.py", text: "import sys\n"}]};
        const warm = await answer(ours(), "/infill", {...body, n_predict: 0});
        assert.equal(warm.content, "");
        assert.equal(warm.tokens_predicted, 0);
        const next = await answer(ours(), "/infill", {...body, n_predict: 2});
        assert.equal(next.timings.cache_n, warm.tokens_evaluated - 1, JSON.stringify(next.timings));
        assert.equal(next.timings.prompt_n, 1);
    });

    test("llama.vscode's chat payload on /v1/chat/completions: llama.cpp's fields, max_tokens −1 (no limit), n_predict 0 (warm-up)", async () => {
        const messages = [{role: "system", content: "You are an expert coder."}, {role: "user", content: "Rename x to count"}];
        // Its chat-edit request, as it sends it (sampler settings of llama.cpp's that this server ignores), ended by a forced EOS.
        const edit = await answer(ours(), "/v1/chat/completions", {messages, stream: false, cache_prompt: true, samplers: "edkypmxt",
            temperature: 0.8, dynatemp_range: 0, typical_p: 1, xtc_probability: 0, dry_multiplier: 0, timings_per_token: false,
            max_tokens: -1, logit_bias: {2: 100}});
        const choice = (edit.choices as Array<{finish_reason: string}>)[0]!;
        assert.equal(choice.finish_reason, "stop");
        const warm = await answer(ours(), "/v1/chat/completions", {messages: [...messages, {role: "user", content: "and y to total"}],
            n_predict: 0, samplers: [], cache_prompt: true});
        const usage = warm.usage as {prompt_tokens: number, completion_tokens: number};
        assert.equal(usage.completion_tokens, 0);
        assert.equal((warm.choices as Array<{message: {content: string}, finish_reason: string}>)[0]!.message.content, "");
        const next = await answer(ours(), "/v1/chat/completions", {messages: [...messages, {role: "user", content: "and y to total"}], max_tokens: 1});
        assert.equal((next.usage as {prompt_tokens_details: {cached_tokens: number}}).prompt_tokens_details.cached_tokens, usage.prompt_tokens - 1,
            "the warm-up left the prompt in the prefix cache");
    });

    test("Continue's llama.cpp provider: its /completion stream (mirostat and the rest as it sends them) gives its content pieces", async () => {
        const body = {prompt: "Once upon a time", stream: true, n_predict: 6, frequency_penalty: 0, presence_penalty: 0, min_p: 0.05, mirostat: 0,
            stop: ["\n\n"], top_k: 40, top_p: 0.95, temperature: 0.5};
        const response = await fetch(`${ours()}/completion`, {method: "POST",
            headers: {"Content-Type": "application/json", "Authorization": "Bearer undefined"}, body: JSON.stringify(body)});
        assert.equal(response.status, 200);
        assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
        const events = (await response.text()).split("\n\n").filter((part) => part.startsWith("data: "))
            .map((part) => JSON.parse(part.slice("data: ".length)) as Answer);
        assert.ok(events.slice(0, -1).every((event) => event.content !== ""), "each piece carries content");
        assert.equal(events.at(-1)!.stop, true);
        assert.ok(events.at(-1)!.tokens_predicted >= 1 && events.at(-1)!.tokens_predicted <= 6);
    });

    test("grammar (GBNF): the same greedy text as llama-server, sampled text fitting it on both; a grammar neither parses is a 400 on both",
        async () => {
            const grammar = "root ::= answer \" \" digit digit?\nanswer ::= \"yes\" | \"no\"\ndigit ::= [0-9]\n";
            const [mine, theirs] = await both("/completion", {prompt: "Once upon a time", n_predict: 16, temperature: 0, grammar});
            assert.equal(mine.content, theirs.content);
            assert.match(mine.content, /^(yes|no) [0-9][0-9]?$/);
            assert.equal(mine.stop_type, "eos", "the grammar is complete: the end of text follows");
            for (const seed of [1, 2, 3]) {
                const sampled = await both("/completion", {prompt: "Once upon a time", n_predict: 16, temperature: 1, seed, grammar});
                for (const answerOf of sampled)
                    assert.match(answerOf.content, /^(yes|no) [0-9][0-9]?$/);
            }
            for (const origin of [ours(), peer.origin]) {
                const {status} = await post(origin, "/completion", {prompt: "x", n_predict: 4, grammar: "root ::= root \"a\""});
                assert.equal(status, 400, `${origin}: a left-recursive grammar`);
            }
        });

    test("n_probs: llama-server's completion_probabilities (ids, text, log-probabilities, alternatives) at temperature 0; streamed per piece",
        async () => {
            type Probability = {id: number, token: string, bytes: number[], logprob?: number, prob?: number};
            type Entry = Probability & {top_logprobs?: Probability[], top_probs?: Probability[]};
            // Plain tokens forced off (the greedy one may be a byte of a character, which llama-server's parser refuses): ASCII letters only.
            const body = {prompt: "Once upon a time", n_predict: 4, temperature: 0, n_probs: 3};
            const [mine, theirs] = await both("/completion", body);
            const mineEntries = mine.completion_probabilities as Entry[];
            const peers = theirs.completion_probabilities as Entry[];
            assert.equal(mineEntries.length, 4);
            assert.equal(peers.length, 4);
            for (const [i, entry] of mineEntries.entries()) {
                const peerEntry = peers[i]!;
                assert.equal(entry.id, peerEntry.id, `token ${i}`);
                assert.equal(entry.token, peerEntry.token);
                assert.deepEqual(entry.bytes, peerEntry.bytes);
                assert.ok(Math.abs(entry.logprob! - peerEntry.logprob!) < 0.02, `token ${i}: ${entry.logprob} vs ${peerEntry.logprob}`);
                assert.deepEqual(entry.top_logprobs!.map((other) => other.id), peerEntry.top_logprobs!.map((other) => other.id));
                for (const [j, other] of entry.top_logprobs!.entries())
                    assert.ok(Math.abs(other.logprob! - peerEntry.top_logprobs![j]!.logprob!) < 0.02, `token ${i} alternative ${j}`);
            }
            const post = await answer(ours(), "/completion", {...body, post_sampling_probs: true});
            const first = (post.completion_probabilities as Entry[])[0]!;
            assert.ok(Math.abs(first.prob! - Math.exp(mineEntries[0]!.logprob!)) < 1e-6 && first.logprob === undefined && first.top_probs!.length === 3);
            const response = await fetch(`${ours()}/completion`, {method: "POST", body: JSON.stringify({...body, stream: true})});
            const events = (await response.text()).split("\n\n").filter((part) => part.startsWith("data: "))
                .map((part) => JSON.parse(part.slice("data: ".length)) as Answer);
            const streamed = events.flatMap((event) => (event.completion_probabilities ?? []) as Entry[]);
            assert.deepEqual(streamed.map((entry) => entry.id), mineEntries.map((entry) => entry.id), "each token's entry once, in its piece's event");
            const plain = await answer(ours(), "/completion", {...body, n_probs: 0});
            assert.equal(plain.completion_probabilities, undefined, "only when asked");
        });

    test("refusals name their field", async () => {
        const refusals: Array<[string, Record<string, unknown>, string]> = [
            ["/infill", {input_suffix: "x"}, "input_prefix"],
            ["/infill", {input_prefix: "x", input_suffix: "y", input_extra: [{filename: "a"}]}, "input_extra[0].text"],
            ["/completion", {prompt: "x", n_probs: 21}, "n_probs"],
            ["/completion", {prompt: "x", grammar: "root ::= nothing"}, "grammar"],
            ["/completion", {prompt: "x", grammar: "root ::= \"a\"", json_schema: {type: "object"}}, "grammar"],
            ["/completion", {prompt: [1, -3]}, "prompt[1]"],
            ["/completion", {n_predict: 3}, "prompt"]
        ];
        for (const [path, body, param] of refusals) {
            const {status, json} = await post(ours(), path, body);
            assert.equal(status, 400, JSON.stringify(body));
            assert.equal((json.error as {param: string}).param, param);
        }
    });
});

const repoSuite = "/infill with repository-level FIM tokens, against llama-server on the same model";
describe(repoSuite, {skip: llamaServerSkipReason(repoSuite)}, () => {
    // `<|repo_name|>` (found by its text, as llama.cpp finds it in GGUFs that do not name it) and `<|file_sep|>` (named in the GGUF).
    const {ours, peer} = serversOnFimModel("repo");

    test("other files in the repo-level pattern: llama-server's prompt tokens and greedy token, with and without other files", async () => {
        const evaluated = await sameInfillAsLlamaServer(ours(), peer().origin, infillCases());
        assert.ok(evaluated[3]! > 510 && evaluated[3]! < 560, `other files cut to 510 tokens: ${evaluated[3]} in all`);
    });

    test("each other file costs its separator, its name line and its text; the snippet-separator model's prompt is another", async () => {
        assert.notEqual(await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: true}),
            await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir, fillInMiddle: "repo"}), "its own cache file");
        const body = {input_prefix: "x", input_suffix: "y", prompt: "", n_predict: 1, temperature: 0,
            input_extra: [{filename: "a.py", text: "a = 1\n"}, {filename: "b.py", text: "b = 2\n"}]};
        const withFiles = await answer(ours(), "/infill", body);
        const without = await answer(ours(), "/infill", {...body, input_extra: []});
        // Per file: the separator, the file name and its newline, the text (behind snippet separators: the separator line
        // and no name). Once, with or without files: the repository token, "myproject\n", the edited file's separator and
        // "filename\n".
        const tokens = async (text: string): Promise<number> => ((await answer(ours(), "/tokenize", {content: text, add_special: false}))
            .tokens as number[]).length;
        const perFile = 1 + await tokens("a.py\n") + await tokens("a = 1\n") + 1 + await tokens("b.py\n") + await tokens("b = 2\n");
        assert.equal(withFiles.tokens_evaluated - without.tokens_evaluated, perFile);
    });
});
