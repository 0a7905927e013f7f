/** What a client that tokenizes for the server needs to know about the model's tokenizer (TokenizerInfo). */
import type {TokenizerInfo} from "../protocol/engineMessages.js";
import type {LlamaModel} from "./llamaTypes.js";
import {chatTemplateOf} from "./promptRenderer.js";

export function tokenizerInfo(model: LlamaModel): TokenizerInfo {
    const {bosString, eosString, shouldPrependBosToken, bos} = model.tokens;
    const chatTemplate = chatTemplateOf(model);
    return {
        addBos: shouldPrependBosToken && bos !== null,
        ...bosString !== null ? {bos: bosString} : {},
        ...eosString !== null ? {eos: eosString} : {},
        ...chatTemplate !== undefined ? {chatTemplate} : {}
    };
}
