/**
 * A LoRA adapter GGUF for the demo model, as llama.cpp's `convert_lora_to_gguf.py` lays one out: `general.type`
 * "adapter", `adapter.type` "lora", `adapter.lora.alpha`, and for each adapted weight `W` of shape [in, out] (ggml
 * order) a pair `W.lora_a` [in, rank] and `W.lora_b` [rank, out]. It adapts `output.weight` only, with random
 * values large enough that the adapted model's greedy tokens differ from the base model's, and leaves the logits of
 * the tokens the demo model never samples (control tokens; with `textOnly`, bytes) as they are. With `attention`, it
 * also adapts the first layer's value projection (`blk.0.attn_v.weight`), so the KV cache a prompt leaves differs with
 * the adapter too (an `output.weight` adapter changes only the logits).
 */
import fs from "node:fs/promises";
import {demoModelGgufSpec, demoNeverSampledTokens, type DemoModelOptions} from "../../engine/model/demoModel.js";
import {writeGguf, type GgufTensorSpec} from "../../engine/model/ggufWriter.js";
import {Xoshiro128} from "../../common/seededRandom.js";

export type DemoLoraOptions = {rank?: number, seed?: number, alpha?: number, attention?: boolean};

export async function writeDemoLoraAdapter(file: string, model: DemoModelOptions, options: DemoLoraOptions = {}): Promise<void> {
    const rank = options.rank ?? 8;
    const output = demoModelGgufSpec(model).tensors.find((tensor) => tensor.name === "output.weight");
    if (output === undefined)
        throw new Error("the demo model has no output.weight");
    const [inputs, outputs] = output.dims as [number, number];
    const random = new Xoshiro128(options.seed ?? 1);
    /** Values uniform in ±std, the first `zeros` elements 0. */
    const source = (std: number, zeros = 0) => () => {
        let next = 0;
        return (out: Float32Array) => {
            for (let i = 0; i < out.length; i++, next++)
                out[i] = next < zeros ? 0 : (random.nextUint32() / 2 ** 31 - 1) * std;
        };
    };
    const tensors: GgufTensorSpec[] = [
        {name: "output.weight.lora_a", dims: [inputs, rank], type: "F32", createSource: source(1)},
        // Row t of lora_b (rank values) adds to token t's logit.
        {name: "output.weight.lora_b", dims: [rank, outputs], type: "F32", createSource: source(1, rank * demoNeverSampledTokens(model.textOnly === true))}
    ];
    if (options.attention === true) {
        const value = demoModelGgufSpec(model).tensors.find((tensor) => tensor.name === "blk.0.attn_v.weight");
        if (value === undefined)
            throw new Error("the demo model has no blk.0.attn_v.weight");
        const [valueInputs, valueOutputs] = value.dims as [number, number];
        tensors.push({name: "blk.0.attn_v.weight.lora_a", dims: [valueInputs, rank], type: "F32", createSource: source(1)},
            {name: "blk.0.attn_v.weight.lora_b", dims: [rank, valueOutputs], type: "F32", createSource: source(1)});
    }
    const handle = await fs.open(file, "w");
    try {
        await writeGguf(handle, [
            {key: "general.architecture", value: {type: "string", value: "llama"}},
            {key: "general.type", value: {type: "string", value: "adapter"}},
            {key: "general.name", value: {type: "string", value: "Inference Monitor demo LoRA"}},
            {key: "adapter.type", value: {type: "string", value: "lora"}},
            {key: "adapter.lora.alpha", value: {type: "float32", value: options.alpha ?? rank}}
        ], tensors);
    } finally {
        await handle.close();
    }
}
