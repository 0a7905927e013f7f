/**
 * `npm run bench:prompt-cache`: more conversations than sequences, side by side on our `serve` and on llama.cpp's
 * `llama-server`, each with its prompt cache on and off (ours `--prompt-cache MIB` / `0`, llama-server `--cache-ram MIB` /
 * `0`). Conversations whose sequences others took come back later: with the cache their prefix is restored, without it
 * evaluated again. This is chat and agent traffic on a local server: several chats or tool sessions, each re-sending its
 * long history every turn, on 2 sequences.
 *
 * Workload: `--conversations` (default 6) conversations, each opening with its own ~`--opening-words` (default 400)
 * words, then `--turns` (default 4) turns taken round robin, one request at a time (so TTFT is the prefill, not a queue;
 * `--concurrent K`: K clients at once, client k taking the turns of conversations k, k + K, … in the same order, so a
 * turn's prompt often arrives while other conversations' answers are being generated, as with several tools at once):
 * each turn's prompt is the conversation so far (opening, earlier questions and the answers this server gave) and a new
 * question (with `--question-words`, that many more words each); 16 tokens out, greedy, ignore_eos, streamed with usage.
 * `--tile-padding both` adds a target of ours with its tile padding off (engine/attentionTilePadding.ts): with a turn's
 * 20–63 new tokens deep in a conversation (`--opening-words 1500 --question-words 30 --dtype q4_0`) that is where it shows.
 * Reported per target: TTFT p50 and mean of the turns
 * after the first (the first is always cold), their cached prompt tokens (the server's own count: `cached_tokens`, or
 * llama-server's `timings.cache_n`), and the wall time. Every target gets a fresh server per repeat, in a rotating order.
 *
 * A benchmark, not a test: do not run it next to other measurements.
 */
import fs from "node:fs";
import OpenAI from "openai";
import {choiceValue, integerValue} from "../cli/optionValues.js";
import {demoModelDtypes, ensureDemoModel} from "../engine/model/demoModel.js";
import {percentile} from "../extension/host/stats/percentiles.js";
import {buildLlamaServer, llamaServerVersion, killOnExit, servingArgs, startLlamaServer} from "./llamaServer.js";
import {readScriptCommandLine} from "./scriptCommandLine.js";
import {startServe} from "./serveProcess.js";

const flags = readScriptCommandLine({
    name: "bench:prompt-cache",
    summary: "more conversations than sequences, each turn resending its history: TTFT and cached tokens on our serve and llama-server, " +
        "prompt cache on and off",
    options: {
        conversations: {type: "string", placeholder: "N", description: "conversations, their turns taken round robin (default 6)"},
        turns: {type: "string", placeholder: "N", description: "turns per conversation (default 4)"},
        parallel: {type: "string", placeholder: "N", description: "sequences (slots) of every server (default 2)"},
        concurrent: {type: "string", placeholder: "K",
            description: "clients at once, each taking the turns of every K-th conversation (default 1: one request at a time)"},
        ["opening-words"]: {type: "string", placeholder: "N", description: "words in each conversation's opening (default 400)"},
        ["question-words"]: {type: "string", placeholder: "N", description: "words added to each turn's question (default 0)"},
        ["tile-padding"]: {type: "string", placeholder: "on|both",
            description: "ours with tile padding (on, its default), or also a target without it (both)"},
        dtype: {type: "string", placeholder: "D", description: `the demo model's weights: ${demoModelDtypes.join(" | ")} (default f16)`},
        ["cache-mib"]: {type: "string", placeholder: "MIB",
            description: "prompt cache size when on: ours --prompt-cache, llama-server's --cache-ram (default 2048)"},
        repeats: {type: "string", placeholder: "N", description: "repeats, a fresh server per target each, medians over them (default 2)"},
        json: {type: "string", placeholder: "FILE", description: "also write the workload and every target's results to FILE"}
    },
    details: "How it measures, and what it measured: README.md (\"Defaults, from measurement\") and this script's header."
}, (values) => ({
    conversations: integerValue("conversations", values.conversations, 6, 1),
    turns: integerValue("turns", values.turns, 4, 1),
    parallel: integerValue("parallel", values.parallel, 2, 1),
    concurrent: integerValue("concurrent", values.concurrent, 1, 1),
    openingWords: integerValue("opening-words", values["opening-words"], 400, 1),
    questionWords: integerValue("question-words", values["question-words"], 0, 0),
    tilePaddingOff: choiceValue("tile-padding", values["tile-padding"], ["on", "both"], "on") === "both",
    dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16"),
    cacheMiB: integerValue("cache-mib", values["cache-mib"], 2048, 1),
    repeats: integerValue("repeats", values.repeats, 2, 1),
    json: values.json
}));
const {conversations, turns, parallel, concurrent, openingWords, questionWords, cacheMiB, repeats, dtype} = flags;
const maxTokens = 16;
const threads = 1;
const contextPerSequence = 4096;

const allTargets = ["ours, cache on", "ours, cache off", "llama-server, cache on", "llama-server, cache off", "ours, no tile padding"] as const;
type Target = typeof allTargets[number];
const targets = allTargets.filter((target) => flags.tilePaddingOff || target !== "ours, no tile padding");

const llamaServerArgs = (cache: boolean): string[] => [...servingArgs({threads, parallel, contextPerSequence}),
    "--cache-ram", cache ? String(cacheMiB) : "0"];
const serveArgs = (cache: boolean, tilePadding = true): string[] => ["--threads", String(threads), "--parallel", String(parallel),
    "--context-size", String(contextPerSequence), "--prompt-cache", cache ? String(cacheMiB) : "0", "--log-interval", "3600",
    ...(tilePadding ? [] : ["--tile-padding", "off"])];

const words = ("time little girl walked park with her dog they played sun until late the boy found box garden opened saw toy car red " +
    "hat book about sea ran mother show what had smiled bird flew over house tree said hello every morning sang song children school " +
    "river old man lived small village near forest friends came visit him day went market bought bread milk apples").split(" ");

/** Seeded words of conversation `c` (`salt` 0: its opening; a turn's question words another). */
function seededWords(c: number, salt: number, count: number): string[] {
    let state = 0x9e3779b9 ^ (c + 1) * 0x85ebca6b ^ salt * 0x27d4eb2d;
    const next = (): number => {
        state ^= state << 13;
        state ^= state >>> 17;
        state ^= state << 5;
        return (state >>> 0) % words.length;
    };
    return Array.from({length: count}, () => words[next()]!);
}

/** Conversation `c`'s opening: its own sentence first (the prefixes differ from the start), then seeded words. */
function opening(c: number): string {
    return [`This is conversation number ${c + 1} about the ${words[c % words.length]}.`, ...seededWords(c, 0, openingWords)].join(" ");
}

type TurnResult = {conversation: number, turn: number, ttftMs: number, promptTokens: number, cachedTokens: number};

/** A streamed answer: its text, TTFT (first text) and the server's token counts. */
type Answer = {text: string, ttftMs: number, promptTokens: number, cachedTokens: number};

/** Requests sent again because the connection closed before any answer (see `ask`), per target run. */
let resent = 0;

/**
 * One stream; its TTFT (first text) and the server's token counts. A connection the server closed before the request got
 * any answer (llama-server's HTTP library ends a kept-alive connection after a few requests, which races a client sending
 * on it while others are in flight) is tried again, from a new start time, up to twice, and counted.
 */
async function ask(openai: OpenAI, prompt: string): Promise<Answer> {
    for (let attempt = 0; ; attempt++) {
        try {
            return await askOnce(openai, prompt);
        } catch (error) {
            if (!(error instanceof OpenAI.APIConnectionError) || attempt === 2)
                throw error;
            resent++;
        }
    }
}

async function askOnce(openai: OpenAI, prompt: string): Promise<Answer> {
    const started = performance.now();
    const stream = await openai.completions.create({model: "m", prompt, max_tokens: maxTokens, temperature: 0, stream: true,
        stream_options: {include_usage: true}, ...{ignore_eos: true}});
    let text = "";
    let ttftMs: number | undefined;
    let promptTokens = -1;
    let cachedTokens = -1;
    for await (const chunk of stream) {
        const piece = chunk.choices[0]?.text ?? "";
        if (piece !== "" && ttftMs === undefined)
            ttftMs = performance.now() - started;
        text += piece;
        if (chunk.usage) {
            promptTokens = chunk.usage.prompt_tokens;
            cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? cachedTokens;
        }
        // llama-server's own count of reused prompt tokens, on its last chunk.
        const timings = (chunk as {timings?: {cache_n?: number}}).timings;
        if (timings?.cache_n !== undefined && cachedTokens < 0)
            cachedTokens = timings.cache_n;
    }
    if (ttftMs === undefined || promptTokens < 0)
        throw new Error(`a stream without text or usage (text ${JSON.stringify(text)}, prompt tokens ${promptTokens})`);
    return {text, ttftMs, promptTokens, cachedTokens};
}

async function runConversations(baseUrl: string): Promise<{turns: TurnResult[], wallS: number}> {
    const openai = new OpenAI({baseURL: baseUrl, apiKey: "not-needed", maxRetries: 0});
    const history = Array.from({length: conversations}, (_, c) => opening(c));
    const results: TurnResult[] = [];
    const started = performance.now();
    // Client k takes conversations k, k + concurrent, …, turn by turn.
    await Promise.all(Array.from({length: Math.min(concurrent, conversations)}, async (_, client) => {
        for (let turn = 0; turn < turns; turn++)
            for (let c = client; c < conversations; c += concurrent) {
                const more = questionWords > 0 ? ` ${seededWords(c, turn + 1, questionWords).join(" ")}` : "";
                const prompt = `${history[c]} Question ${turn + 1}: what did the ${words[(c + turn) % words.length]} do next${more}? Answer:`;
                const answer = await ask(openai, prompt);
                history[c] = `${prompt}${answer.text}`;
                const {ttftMs, promptTokens, cachedTokens} = answer;
                results.push({conversation: c, turn, ttftMs, promptTokens, cachedTokens});
            }
    }));
    return {turns: results, wallS: (performance.now() - started) / 1000};
}

async function runTarget(target: Target, binary: string, modelPath: string): Promise<{turns: TurnResult[], wallS: number}> {
    const cache = target.endsWith("cache on") || target === "ours, no tile padding";
    if (target.startsWith("llama-server")) {
        const server = await startLlamaServer({binary, model: modelPath, args: llamaServerArgs(cache)});
        try {
            return await runConversations(server.baseUrl);
        } finally {
            await server.stop();
        }
    }
    const server = await startServe(modelPath, serveArgs(cache, target !== "ours, no tile padding"), killOnExit);
    try {
        return await runConversations(server.baseUrl);
    } finally {
        await server.stop();
    }
}

type Row = {target: Target, repeat: number, later_ttft_p50_ms: number, later_ttft_mean_ms: number, first_ttft_p50_ms: number,
    later_prompt_tokens: number, later_cached_tokens: number, wall_s: number, resent: number};

async function main(): Promise<void> {
    const modelPath = await ensureDemoModel({size: "small", textOnly: true, dtype});
    const binary = await buildLlamaServer();
    const clients = concurrent === 1 ? "one request at a time" : `${Math.min(concurrent, conversations)} clients at once`;
    console.log(`workload: ${conversations} conversations × ${turns} turns, round robin, ${clients}; openings of ~${openingWords} ` +
        `words, ${questionWords} more words per question; ${maxTokens} tokens out (greedy, ignore_eos); demo small (textOnly, ${dtype}) ${modelPath}; ${threads} thread, ${parallel} ` +
        `sequences × ${contextPerSequence}; prompt cache ${cacheMiB} MiB when on; ${repeats} repeat${repeats > 1 ? "s" : ""}, fresh servers`);
    console.log(`llama-server ${llamaServerVersion(binary)}: -m MODEL --host 127.0.0.1 --port P ${llamaServerArgs(true).join(" ")} (on) / ` +
        "--cache-ram 0 (off)");
    console.log(`serve: --model MODEL --port 0 ${serveArgs(true).join(" ")} (on) / --prompt-cache 0 (off)`);
    const rows: Row[] = [];
    for (let repeat = 0; repeat < repeats; repeat++)
        for (let i = 0; i < targets.length; i++) {
            const target = targets[(i + repeat) % targets.length]!;
            resent = 0;
            const run = await runTarget(target, binary, modelPath);
            const later = run.turns.filter((t) => t.turn > 0);
            const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);
            const row: Row = {target, repeat, later_ttft_p50_ms: percentile(later.map((t) => t.ttftMs), 50),
                later_ttft_mean_ms: sum(later.map((t) => t.ttftMs)) / later.length,
                first_ttft_p50_ms: percentile(run.turns.filter((t) => t.turn === 0).map((t) => t.ttftMs), 50),
                later_prompt_tokens: sum(later.map((t) => t.promptTokens)), later_cached_tokens: sum(later.map((t) => t.cachedTokens)),
                wall_s: run.wallS, resent};
            rows.push(row);
            console.error(`repeat ${repeat + 1} · ${target}: later turns TTFT p50 ${row.later_ttft_p50_ms.toFixed(1)} ms, cached ` +
                `${row.later_cached_tokens} of ${row.later_prompt_tokens} prompt tokens, ${row.wall_s.toFixed(1)} s` +
                (resent > 0 ? `, ${resent} request${resent > 1 ? "s" : ""} sent again after the server closed the connection` : ""));
        }
    const median = (target: Target, key: "later_ttft_p50_ms" | "later_ttft_mean_ms" | "first_ttft_p50_ms" | "wall_s"): number =>
        percentile(rows.filter((r) => r.target === target).map((r) => r[key]), 50);
    console.log(`\nmedians over ${repeats} repeat${repeats > 1 ? "s" : ""}; "later": turns 2..${turns}`);
    console.log(`  ${"target".padEnd(24)}${["first TTFT", "later TTFT p50", "later mean", "later cached", "wall"].map((h) => h.padStart(16)).join("")}`);
    for (const target of targets) {
        const last = rows.filter((r) => r.target === target).at(-1)!;
        console.log(`  ${target.padEnd(24)}${`${median(target, "first_ttft_p50_ms").toFixed(1)} ms`.padStart(16)}` +
            `${`${median(target, "later_ttft_p50_ms").toFixed(1)} ms`.padStart(16)}${`${median(target, "later_ttft_mean_ms").toFixed(1)} ms`.padStart(16)}` +
            `${`${(100 * last.later_cached_tokens / last.later_prompt_tokens).toFixed(1)} %`.padStart(16)}${`${median(target, "wall_s").toFixed(1)} s`.padStart(16)}`);
    }
    const ratio = (ours: Target, theirs: Target): string => (median(ours, "later_ttft_p50_ms") / median(theirs, "later_ttft_p50_ms")).toFixed(3);
    console.log(`  later-turn TTFT p50, ours / llama-server: cache on ${ratio("ours, cache on", "llama-server, cache on")}, ` +
        `cache off ${ratio("ours, cache off", "llama-server, cache off")}; ours on / off ${ratio("ours, cache on", "ours, cache off")}` +
        (flags.tilePaddingOff ? `; ours tile padding on / off ${ratio("ours, cache on", "ours, no tile padding")}, ` +
            `off / llama-server (cache on) ${ratio("ours, no tile padding", "llama-server, cache on")}` : ""));
    if (flags.json !== undefined) {
        const workload = {conversations, turns, parallel, concurrent, opening_words: openingWords, question_words: questionWords, dtype,
            max_tokens: maxTokens, threads, context_per_sequence: contextPerSequence, cache_mib: cacheMiB, repeats, model_path: modelPath};
        fs.writeFileSync(flags.json, JSON.stringify({workload, results: rows}, null, 2) + "\n");
        console.log(`wrote ${flags.json}`);
    }
}

main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
});
