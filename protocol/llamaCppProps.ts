/**
 * llama.cpp's server's `GET /props` and `POST /apply-template` answers, as tools written for llama-server read them:
 * `/props` for the per-sequence context (`default_generation_settings.n_ctx`), the sequences (`total_slots`), the
 * model's name, template and special tokens; `/apply-template` for the prompt text a chat request renders to (to count
 * its tokens before sending it). Declared once for the server and its tests.
 */
import type {LoraScaleEntry} from "./loraAdapters.js";

/** The sampling defaults a request gets when it sets none (llama-server's `default_generation_settings.params`, ours). */
export type LlamaCppDefaultParams = {
    n_predict: number, temperature: number, top_k: number, top_p: number, min_p: number, seed: number,
    repeat_last_n: number, repeat_penalty: number, presence_penalty: number, frequency_penalty: number,
    dry_multiplier: number, dry_base: number, dry_allowed_length: number, dry_penalty_last_n: number,
    xtc_probability: number, xtc_threshold: number, ignore_eos: boolean, stream: boolean,
    /**
     * llama-server's samplers that node-llama-cpp has none of, at the values where they do nothing (what a request runs
     * with here whatever it asks: ignoredSamplingFields.ts).
     */
    typical_p: number, top_n_sigma: number, dynatemp_range: number, dynatemp_exponent: number, mirostat: number, mirostat_tau: number,
    mirostat_eta: number, min_keep: number,
    /** The samplers applied, in order, by llama-server's names (node-llama-cpp's chain; greedy at temperature 0). */
    samplers: string[],
    /**
     * The LoRA adapters' scales a request runs with: every adapter's, as the server runs them (a request here cannot ask
     * for others). llama-server lists what a request named, and [] for one that named none and runs with the server's.
     */
    lora: LoraScaleEntry[]
};

export type LlamaCppProps = {
    default_generation_settings: {n_ctx: number, params: LlamaCppDefaultParams},
    total_slots: number,
    model_alias: string,
    model_path: string,
    modalities: {vision: false, video: false, audio: false},
    /** The GGUF's chat template; "" when it has none. */
    chat_template: string,
    bos_token: string,
    eos_token: string,
    build_info: string,
    endpoint_slots: true,
    endpoint_props: true,
    endpoint_metrics: boolean,
    is_sleeping: false
};

/** `/apply-template`: the chat request's prompt as text (special tokens written out, no leading BOS). */
export type ApplyTemplateAnswer = {prompt: string};
