/**
 * Reasoning apart from the answer: the streaming splitter at every piece size, the syntax read from node-llama-cpp's
 * wrapper settings, and on a real model (the tiny demo model with the demo `thinking` template) the syntax
 * node-llama-cpp reads from the template, the prompt's ending (open / closed) and a past reasoning in the history.
 */
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";
import {demoChatTemplates, ensureDemoModel} from "../../engine/model/demoModel.js";
import {importNodeLlamaCpp, type Llama, type LlamaModel} from "../../engine/llamaTypes.js";
import {preloadChatWrapper, reasoningSyntaxFor, renderPrompt} from "../../engine/promptRenderer.js";
import {ReasoningSplitter} from "../../engine/reasoning/reasoningSplitter.js";
import {reasoningSyntaxOf, type ReasoningSyntax} from "../../engine/reasoning/reasoningSyntax.js";
import {testCacheDir} from "../helpers/testModels.js";

const think: ReasoningSyntax = {open: "<think>", close: "</think>", opener: "<think>\n", closer: "\n</think>\n\n", opensOnAnswerStart: true};

/** `text` pushed in pieces of `size` characters, then finished: the reasoning and the answer, joined. */
function split(text: string, size: number, startsOpen: boolean): {reasoning: string, answer: string} {
    const splitter = new ReasoningSplitter(think, startsOpen);
    let reasoning = "";
    let answer = "";
    for (let at = 0; at < text.length; at += size) {
        const out = splitter.push(text.slice(at, at + size));
        reasoning += out.reasoning;
        answer += out.answer;
    }
    const rest = splitter.finish();
    return {reasoning: reasoning + rest.reasoning, answer: answer + rest.answer};
}

const cases: Array<{name: string, text: string, startsOpen: boolean, reasoning: string, answer: string}> = [
    {name: "opened by the prompt, closed", text: "I think so.\nYes, so.\n</think>\n\nYes.", startsOpen: true,
        reasoning: "I think so.\nYes, so.", answer: "Yes."},
    {name: "never closed: all reasoning", text: "\nstill thinking  ", startsOpen: true, reasoning: "still thinking", answer: ""},
    {name: "closed at once", text: "\n</think>\n\nx y", startsOpen: true, reasoning: "", answer: "x y"},
    {name: "a partial closing marker inside", text: "a </thin b</think>c", startsOpen: true, reasoning: "a </thin b", answer: "c"},
    {name: "opened by the output after whitespace", text: "  <think>\nhmm\n</think>\nok <think> no", startsOpen: false,
        reasoning: "hmm", answer: "ok <think> no"},
    {name: "no marker: all answer", text: "Hello <think> x", startsOpen: false, reasoning: "", answer: "Hello <think> x"},
    {name: "a cut opening marker is answer", text: " <thi", startsOpen: false, reasoning: "", answer: " <thi"}
];

describe("ReasoningSplitter", () => {
    for (const c of cases)
        test(`${c.name}, at every piece size`, () => {
            for (let size = 1; size <= c.text.length; size++)
                assert.deepEqual(split(c.text, size, c.startsOpen), {reasoning: c.reasoning, answer: c.answer}, `piece size ${size}`);
        });

    test("reasoning streams as it comes: only a possible marker and trailing whitespace wait", () => {
        const splitter = new ReasoningSplitter(think, true);
        assert.deepEqual(splitter.push("First, "), {reasoning: "First,", answer: ""});
        assert.deepEqual(splitter.push("the weather.\n</"), {reasoning: " the weather.", answer: ""});
        assert.equal(splitter.inReasoning, true);
        assert.deepEqual(splitter.push("think>\n\nSunny"), {reasoning: "", answer: "Sunny"});
        assert.equal(splitter.inReasoning, false);
        assert.deepEqual(splitter.push(" today"), {reasoning: "", answer: " today"});
    });
});

describe("reasoning syntax from node-llama-cpp's wrapper settings", () => {
    const text = (value: unknown): string => String(value);
    test("a prefix and suffix, opened on each answer", () => {
        assert.deepEqual(reasoningSyntaxOf({prefix: "<think>\n", suffix: "\n</think>\n\n", openOnResponseStart: true}, text), think);
    });
    test("opened by the template (no opening text), or opened only by the model", () => {
        assert.deepEqual(reasoningSyntaxOf({prefix: {type: "openedOnStart"}, suffix: "</think>"}, text),
            {open: undefined, close: "</think>", opener: "", closer: "</think>", opensOnAnswerStart: true});
        assert.equal(reasoningSyntaxOf({prefix: "[THINK]", suffix: "[/THINK]"}, text)?.opensOnAnswerStart, false);
    });
    test("node-llama-cpp's wrappers for Qwen3, DeepSeek-R1 and Seed-OSS (the ones their GGUFs resolve to)", async () => {
        const {QwenChatWrapper, DeepSeekChatWrapper, SeedChatWrapper, LlamaText} = await importNodeLlamaCpp();
        const llamaText = (value: unknown): string => LlamaText(value as Parameters<typeof LlamaText>[0]).toString();
        const of = (wrapper: {settings: {segments?: {thought?: unknown}}}): ReasoningSyntax | undefined =>
            reasoningSyntaxOf(wrapper.settings.segments?.thought as Parameters<typeof reasoningSyntaxOf>[0], llamaText);
        assert.deepEqual(of(new QwenChatWrapper()), {open: "<think>", close: "</think>", opener: "<think>\n", closer: "\n</think>",
            opensOnAnswerStart: false});
        assert.equal(of(new QwenChatWrapper({variation: "3.5"}))?.opensOnAnswerStart, true);
        assert.deepEqual(of(new DeepSeekChatWrapper()), {open: "<think>", close: "</think>", opener: "<think>", closer: "</think>",
            opensOnAnswerStart: false});
        assert.equal(of(new SeedChatWrapper())?.close, "</seed:think>");
    });
    test("none without a closing marker", () => {
        assert.equal(reasoningSyntaxOf(undefined, text), undefined);
        assert.equal(reasoningSyntaxOf({prefix: "<think>"}, text), undefined);
        assert.equal(reasoningSyntaxOf({prefix: "<think>", suffix: " \n"}, text), undefined);
    });
});

describe("reasoning on a real model (demo `thinking` template)", () => {
    let llama: Llama;
    let model: LlamaModel;
    const detokenize = (tokens: Parameters<LlamaModel["detokenize"]>[0]): string => model.detokenize(tokens, true);
    const question = [{role: "user" as const, content: "Why?"}];

    before(async () => {
        const {getLlama} = await importNodeLlamaCpp();
        llama = await getLlama({gpu: false, build: "never"});
        model = await llama.loadModel({modelPath: await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir,
            chatTemplate: demoChatTemplates.thinking})});
        await preloadChatWrapper(model);
    });
    after(async () => {
        await llama.dispose();
    });

    test("node-llama-cpp reads the markers from the template; they are single tokens", () => {
        assert.deepEqual(reasoningSyntaxFor(model), think);
        assert.equal(model.tokenize("<think>", true).length, 1);
        assert.equal(model.tokenize("</think>", false).length, 1);
    });

    test("the prompt opens the reasoning as the template's generation prompt does, or closes an empty one", () => {
        const plain = renderPrompt(model, {messages: question});
        assert.ok(detokenize(plain).endsWith("<|assistant|>\n"));
        // The demo's SentencePiece vocabulary puts a space marker before text that follows a separately tokenized part.
        const added = (answerStart: "open" | "closed"): string => {
            const tokens = renderPrompt(model, {messages: question}, answerStart);
            assert.deepEqual(tokens.slice(0, plain.length), plain);
            return detokenize(tokens.slice(plain.length)).replaceAll(" ", "");
        };
        assert.equal(added("open"), "<think>\n");
        assert.equal(added("closed"), "<think>\n\n</think>\n\n");
    });

    test("an assistant's past reasoning is rendered before its answer", () => {
        const prompt = detokenize(renderPrompt(model, {messages: [...question,
            {role: "assistant", content: "Because.", reasoning: "Let me see."}, {role: "user", content: "Sure?"}]}, "open"));
        assert.match(prompt, /<\|assistant\|>\n<think> ?\nLet me see\. ?\n<\/think> ?\n\nBecause\. ?<\|end\|>\n<\|user\|>\nSure\?/);
    });
});
