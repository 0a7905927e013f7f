/**
 * llama.cpp's measurements in answers on our server, against llama-server on the same model (stories260K, greedy), on
 * `/completion`, `/v1/completions` and `/v1/chat/completions`:
 * - prompt progress (`return_progress: true` on a stream): chunks before the first token, in each endpoint's chunk shape
 *   with llama-server's `prompt_progress` fields, from the cached prefix to the whole prompt. A prompt evaluated in chunks
 *   while another request decodes reports each chunk, and `GET /slots` follows it (`n_prompt_tokens_processed`), as does
 *   the request's lifecycle (`prefilledTokens`) until its first token;
 * - `timings` in the OpenAI endpoints' whole answers and streams' last chunks, and with `timings_per_token` in every chunk,
 *   counting what the answer's usage counts.
 */
import {tileFillingTokens} from "../../engine/attentionTilePadding.js";
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import type {LlamaPromptProgress} from "../../protocol/llamaCppMeasures.js";
import type {LlamaCppSlot} from "../../protocol/llamaCppSlots.js";
import type {RequestLifecycle} from "../../protocol/requestLifecycle.js";
import {buildLlamaServer, startLlamaServer, type LlamaServer} from "../../scripts/llamaServer.js";
import {apiForSuite} from "../helpers/apiUnderTest.js";
import {llamaServerSkipReason} from "../helpers/llamaServerPrerequisite.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

type Event = Record<string, unknown> & {prompt_progress?: LlamaPromptProgress};

/** The JSON events of a server-sent-event stream (without `[DONE]`). */
function events(text: string): Event[] {
    return text.split("\n\n").map((block) => block.trim()).filter((block) => block.startsWith("data: ") && block !== "data: [DONE]")
        .map((block) => JSON.parse(block.slice("data: ".length)) as Event);
}

/** Whether an event carries generated text (a piece's `content`, a completion's `text`, a chat delta's `content`). */
function hasText(event: Event): boolean {
    if (typeof event.content === "string")
        return event.content !== "";
    const choice = (event.choices as Array<{text?: string, delta?: {content?: string | null}}> | undefined)?.[0];
    return (choice?.text ?? choice?.delta?.content ?? "") !== "";
}

const stories = findStoriesModel();
const suite = "llama.cpp's prompt progress and timings, against llama-server on the same model";
describe(suite, {skip: llamaServerSkipReason(suite) || skipReason(suite, stories.missing === undefined ? [] : [stories.missing])}, () => {
    const api = apiForSuite({modelPath: stories.path ?? "", contextSize: 2048, parallel: 2});
    let peer: LlamaServer | undefined;
    before(async () => {
        peer = await startLlamaServer({binary: await buildLlamaServer(), model: stories.path ?? "",
            // Its batch as our engine's (node-llama-cpp's default: 512 tokens here).
            args: ["-t", "1", "-np", "2", "-c", "4096", "-b", "512", "--no-webui"], readyTimeoutMs: 30_000});
    });
    after(async () => {
        await peer?.stop();
    });
    const ours = (): string => api.openai.baseURL.replace(/\/v1$/, "");
    const post = async (origin: string, path: string, body: object, signal?: AbortSignal): Promise<Response> =>
        await fetch(`${origin}${path}`, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body), signal});
    async function stream(origin: string, path: string, body: object): Promise<Event[]> {
        const response = await post(origin, path, {temperature: 0, stream: true, ...body});
        const text = await response.text();
        assert.equal(response.status, 200, `${origin}${path}: ${text}`);
        return events(text);
    }
    /** The progress events, checked: all before the first text, from the cached prefix to the whole prompt, never back. */
    function progressOf(list: readonly Event[], where: string): LlamaPromptProgress[] {
        const firstText = list.findIndex(hasText);
        assert.ok(firstText > 0, `${where}: text after the progress`);
        const progress = list.filter((event) => event.prompt_progress !== undefined);
        assert.ok(progress.every((event) => list.indexOf(event) < firstText), `${where}: progress before the first text`);
        const reports = progress.map((event) => event.prompt_progress!);
        assert.ok(reports.length >= 2, `${where}: ${JSON.stringify(reports)}`);
        const [first, last] = [reports[0]!, reports[reports.length - 1]!];
        assert.equal(first.processed, first.cache, `${where}: starts at the cached prefix`);
        assert.equal(last.processed, last.total, `${where}: ends with the whole prompt`);
        for (const [i, report] of reports.entries()) {
            assert.deepEqual(Object.keys(report).sort(), ["cache", "processed", "time_ms", "total"]);
            assert.ok(Number.isInteger(report.time_ms) && report.time_ms >= 0);
            if (i > 0)
                assert.ok(report.processed >= reports[i - 1]!.processed && report.time_ms >= reports[i - 1]!.time_ms, `${where}: never back`);
        }
        return reports;
    }

    const prompt = "Once upon a time there was a little girl named Lily. She loved to play in the park with her friends. ".repeat(3);
    const endpoints = [
        {path: "/completion", body: {prompt, n_predict: 4}},
        {path: "/v1/completions", body: {prompt, max_tokens: 4}},
        {path: "/v1/chat/completions", body: {messages: [{role: "user", content: prompt}], max_tokens: 4}}
    ] as const;

    test("return_progress: chunks before the first token on each endpoint, in llama-server's shape", async () => {
        for (const {path, body} of endpoints) {
            const [mine, theirs] = [await stream(ours(), path, {...body, return_progress: true}),
                await stream(peer!.origin, path, {...body, return_progress: true})];
            const [myProgress, theirProgress] = [progressOf(mine, `ours ${path}`), progressOf(theirs, `llama-server ${path}`)];
            const myChunk = mine.find((event) => event.prompt_progress !== undefined)!;
            const theirChunk = theirs.find((event) => event.prompt_progress !== undefined)!;
            for (const key of Object.keys(myChunk))
                assert.ok(key in theirChunk, `${path}: llama-server's progress chunk has ${key}`);
            if (path !== "/v1/chat/completions")
                assert.equal(myProgress[0]!.total, theirProgress[0]!.total, `${path}: the same prompt, the same token count`);
            else
                assert.deepEqual((myChunk.choices as Array<{delta: object}>)[0]!.delta, {role: "assistant", content: ""});
            const last = mine[mine.length - 1]!;
            const total = path === "/completion" ? last.tokens_evaluated : (last.usage as {prompt_tokens: number} | undefined)?.prompt_tokens;
            if (total !== undefined)
                assert.equal(myProgress[0]!.total, total, `${path}: the prompt's tokens, as the answer counts them`);
            // Without the field, no progress (as llama-server).
            const plain = await stream(ours(), path, body);
            assert.equal(plain.filter((event) => event.prompt_progress !== undefined).length, 0, path);
        }
    });

    test("a prompt longer than a batch, alone: progress after each batch, as llama-server's with the same batch", async () => {
        const long = "A cat sat on the warm mat and looked at the little red ball by the door. ".repeat(40);
        for (const origin of [ours(), peer!.origin]) {
            const reports = progressOf(await stream(origin, "/completion", {prompt: long, n_predict: 2, return_progress: true}), origin);
            const {total, cache} = reports[0]!;
            assert.ok(total - cache > 1024 && total - cache <= 1536, `${total} tokens, ${cache} cached: two whole batches and a part`);
            // The tokens evaluated by each report (a server may find the first token cached).
            assert.deepEqual(reports.map((report) => report.processed - cache), [0, 512, 1024, total - cache], `${origin}: a report per batch`);
        }
    });

    type Timings = Record<string, number>;
    type Usage = {prompt_tokens: number, completion_tokens: number};
    /** Timings that count what the usage counts. */
    function checkTimings(timings: Timings | undefined, usage: Usage, where: string): void {
        assert.ok(timings !== undefined, `${where}: timings`);
        assert.equal(timings.cache_n! + timings.prompt_n!, usage.prompt_tokens, `${where}: ${JSON.stringify(timings)}`);
        assert.equal(timings.predicted_n, usage.completion_tokens, where);
        assert.ok(timings.prompt_ms! > 0 && timings.predicted_ms! > 0 && timings.predicted_per_second! > 0, `${where}: ${JSON.stringify(timings)}`);
    }

    test("timings in the OpenAI endpoints' whole answers and streams' last chunks, with llama-server's fields", async () => {
        for (const {path, body} of endpoints.filter((endpoint) => endpoint.path !== "/completion")) {
            const keys: string[][] = [];
            for (const origin of [ours(), peer!.origin]) {
                const whole = await post(origin, path, {...body, temperature: 0});
                const answer = await whole.json() as {timings?: Timings, usage: Usage};
                checkTimings(answer.timings, answer.usage, `${origin}${path}`);
                keys.push(Object.keys(answer.timings!).sort());
                // Streamed: the last chunk, the usage one when asked for.
                for (const includeUsage of [false, true]) {
                    const list = await stream(origin, path, {...body, stream_options: {include_usage: includeUsage}});
                    const last = list.at(-1)!;
                    assert.ok(last.timings !== undefined, `${origin}${path} (usage ${includeUsage}): ${JSON.stringify(last)}`);
                    if (includeUsage)
                        checkTimings(last.timings as Timings, last.usage as Usage, `${origin}${path} streamed`);
                    assert.equal(list.filter((event) => event.timings !== undefined).length, 1, "in the last chunk only");
                }
            }
            assert.deepEqual(keys[0], keys[1], `${path}: llama-server's timings fields`);
        }
        // Several choices: no timings of one request for all of them.
        const two = await post(ours(), "/v1/completions", {prompt, max_tokens: 2, n: 2});
        assert.equal((await two.json() as {timings?: Timings}).timings, undefined);
    });

    test("timings_per_token: every chunk has the request's timings so far", async () => {
        for (const {path, body} of endpoints) {
            const list = await stream(ours(), path, {...body, timings_per_token: true, return_progress: true, stream_options: {include_usage: true}});
            const measured = list.filter((event) => event.timings !== undefined);
            assert.equal(measured.length, list.length, `${path}: every chunk`);
            const predicted = measured.map((event) => (event.timings as Timings).predicted_n!);
            assert.ok(predicted.every((n, i) => i === 0 || n >= predicted[i - 1]!), `${path}: ${JSON.stringify(predicted)}`);
            assert.equal(predicted[0], 0, `${path}: nothing generated before the first token`);
            if (path === "/completion")
                for (const event of list.filter((piece) => piece.stop === false && piece.prompt_progress === undefined))
                    assert.equal((event.timings as Timings).predicted_n, event.tokens_predicted, "the tokens so far");
            else
                checkTimings(list.at(-1)!.timings as Timings, list.at(-1)!.usage as Usage, path);
        }
    });

    test("cache_prompt: false: a repeated prompt is evaluated whole, as llama-server's", async () => {
        const again = "The sun was warm and the birds sang in the tall green trees. ".repeat(4);
        for (const origin of [ours(), peer!.origin]) {
            const ask = async (extra: object): Promise<Timings> =>
                (await (await post(origin, "/completion", {prompt: again, n_predict: 2, temperature: 0, ...extra})).json() as {timings: Timings}).timings;
            await ask({});
            const cached = await ask({});
            assert.ok(cached.cache_n! > 0, `${origin}: the repeat is found cached by default`);
            const whole = await ask({cache_prompt: false});
            assert.equal(whole.cache_n, 0, origin);
            assert.equal(whole.prompt_n, cached.cache_n! + cached.prompt_n!, origin);
        }
        // The OpenAI endpoints take it too.
        const answer = await (await post(ours(), "/v1/completions", {prompt: again, max_tokens: 2, cache_prompt: false})).json() as
            {usage: {prompt_tokens_details?: {cached_tokens: number}}};
        assert.equal(answer.usage.prompt_tokens_details?.cached_tokens ?? 0, 0);
    });

    test("the official openai client streams a chat with return_progress to the same text", async () => {
        const request = {model: "m", messages: [{role: "user" as const, content: prompt}], max_tokens: 8, temperature: 0};
        const plain = await api.openai.chat.completions.create(request);
        let text = "";
        let progress = 0;
        const chunks = await api.openai.chat.completions.create({...request, stream: true, ...{return_progress: true}});
        for await (const chunk of chunks) {
            text += chunk.choices[0]?.delta.content ?? "";
            if ((chunk as {prompt_progress?: LlamaPromptProgress}).prompt_progress !== undefined)
                progress++;
        }
        assert.ok(progress >= 2, `${progress} progress chunks`);
        assert.equal(text, plain.choices[0]!.message.content);
    });

    test("a prompt evaluated in chunks while another request decodes: progress per chunk, followed by /slots and the lifecycle", async () => {
        const chunkTokens = api.client.info!.prefillChunkTokens;
        const lifecycles: RequestLifecycle[] = [];
        const prefilled: number[] = [];
        const stopObserving = api.client.observe({onOutputs: (step) => {
            for (const lifecycle of step.iteration.updated)
                if (lifecycle.prefilledTokens !== undefined)
                    prefilled.push(lifecycle.prefilledTokens);
            lifecycles.push(...step.iteration.finished);
        }});
        const controller = new AbortController();
        const decoding = await post(ours(), "/completion", {prompt: "Once upon a time", n_predict: 2000, ignore_eos: true, stream: true},
            controller.signal);
        const reader = decoding.body!.getReader();
        await reader.read();
        try {
            // Not the earlier tests' prompt: none of it cached.
            const long = "The dog ran to the big tree and saw a bird in the sky. ".repeat(24);
            const response = await post(ours(), "/completion", {prompt: long, n_predict: 2, temperature: 0, stream: true, return_progress: true});
            assert.equal(response.status, 200);
            const decoder = new TextDecoder();
            const longReader = response.body!.getReader();
            let text = "";
            let slotRead: {progress: LlamaPromptProgress, slot: LlamaCppSlot} | undefined;
            for (;;) {
                const {done, value} = await longReader.read();
                if (done)
                    break;
                text += decoder.decode(value, {stream: true});
                const progress = events(text).map((event) => event.prompt_progress).filter((report) => report !== undefined).at(-1);
                if (slotRead === undefined && progress !== undefined && progress.processed > progress.cache && progress.processed < progress.total) {
                    // Mid-prompt: the slot that is not decoding has evaluated at least this much of it, and not all of it.
                    const slots = await (await fetch(`${ours()}/slots`)).json() as LlamaCppSlot[];
                    slotRead = {progress, slot: slots.find((slot) => slot.is_processing && slot.next_token![0].n_decoded === 0)!};
                }
            }
            const reports = progressOf(events(text), "a prompt in chunks");
            const middle = reports.filter((report) => report.processed > report.cache && report.processed < report.total);
            assert.ok(middle.length >= 3, JSON.stringify(reports));
            for (const [i, report] of middle.entries()) {
                const whole = reports[0]!.cache + (i + 1) * chunkTokens;
                // On the CPU the last piece before the final step may be shorter, leaving that step a whole attention tile.
                const leavesATile = i === middle.length - 1 && report.processed < whole && report.total - report.processed === tileFillingTokens(false);
                assert.ok(report.processed === whole || leavesATile, `chunks of ${chunkTokens}: ${JSON.stringify(reports)}`);
            }
            assert.ok(slotRead !== undefined, "/slots read while the prompt was evaluated");
            const {progress, slot} = slotRead;
            assert.ok(slot.n_prompt_tokens_processed! >= progress.processed - progress.cache &&
                slot.n_prompt_tokens_processed! < progress.total - progress.cache, JSON.stringify({progress, slot}));
            assert.equal(slot.n_prompt_tokens, slot.n_prompt_tokens_cache! + slot.n_prompt_tokens_processed!);
            // The answer names the sequence it ran on, which the lifecycle records.
            const final = events(text).at(-1)!;
            assert.equal(final.id_slot, slot.id);
        } finally {
            controller.abort();
            await reader.read().catch(() => undefined);
        }
        const deadline = Date.now() + 10_000;
        while (api.client.inFlightCount > 0 && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 10));
        stopObserving();
        assert.ok(prefilled.length >= 3 && prefilled.every((tokens, i) => i === 0 || tokens > prefilled[i - 1]!), JSON.stringify(prefilled));
        assert.ok(lifecycles.length === 2 && lifecycles.every((lifecycle) => lifecycle.prefilledTokens === undefined),
            "ended requests have no prefill in progress");
    });
});
