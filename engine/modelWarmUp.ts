/**
 * One forward pass right after loading, as llama.cpp's own server does at start ("warming up the model with
 * an empty run"): otherwise the first request pays for the model's pages faulting in from the mmap'd file and
 * the backend's first compute. Measured on the 2-vCPU VM (process mode, 1 thread, a ~30-token prompt, three
 * requests in a row after each load, 4 loads each way, interleaved, demo `medium` f16, 198 MB): the first
 * request's TTFT was 180–194 ms without it and 121–125 ms with it; loading took ~0.1 s longer (2.3–2.4 →
 * 2.4–2.5 s). A multi-gigabyte model has proportionally more pages to fault in. With it the first request is
 * as fast as the next ones when their prompts share no prefix (126–129 vs 124–127 ms, in process); a 32-token
 * warm-up did no better.
 */
import {errorMessage} from "../common/errorMessage.js";
import type {LlamaContext, LlamaModel} from "./llamaTypes.js";

/**
 * Evaluates one token (the model's BOS, else its EOS, else the first of "a") on a sequence of `context` and samples
 * one, so every layer runs, the output layer included; then disposes of the sequence, whose KV cells are
 * freed and whose slot returns to the context: the engine's sequences start empty.
 */
export async function warmUpModel(model: LlamaModel, context: LlamaContext): Promise<void> {
    const sequence = context.getSequence();
    try {
        const token = model.tokens.bos ?? model.tokens.eos ?? model.tokenize("a")[0];
        if (token !== undefined)
            for await (const _sampled of sequence.evaluate([token], {temperature: 0, yieldEogToken: true}))
                break;
    } catch (error) {
        throw new Error(`the model failed its first evaluation (one token, right after loading): ${errorMessage(error)}`, {cause: error});
    } finally {
        await sequence.dispose();
    }
}
