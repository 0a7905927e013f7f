/**
 * node-llama-cpp is ESM-only and this project compiles to CommonJS (VS Code loads extensions as
 * CommonJS): values come in through `await import("node-llama-cpp")`, types through this one file.
 */
import type * as NodeLlamaCppModule from "node-llama-cpp" with {"resolution-mode": "import"};

export type {
    ChatHistoryItem, Llama, LlamaContext, LlamaContextSequence, LlamaGrammar, LlamaGrammarEvaluationState, LlamaModel,
    SequenceEvaluateOptions, Token, GgufFileInfo, BatchItem, PrioritizedBatchItem
} from "node-llama-cpp" with {"resolution-mode": "import"};

export type NodeLlamaCpp = typeof NodeLlamaCppModule;
/** node-llama-cpp's TokenBias class (a value: it comes from the loaded module). */
export type TokenBiasClass = NodeLlamaCpp["TokenBias"];
/** node-llama-cpp's LlamaGrammarEvaluationState class (a value, as TokenBias). */
export type LlamaGrammarEvaluationStateClass = NodeLlamaCpp["LlamaGrammarEvaluationState"];

let loaded: Promise<NodeLlamaCpp> | undefined;

/** Loads node-llama-cpp once (a dynamic import, so bundlers keep it external and ESM). */
export function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
    loaded ??= import("node-llama-cpp");
    return loaded;
}
