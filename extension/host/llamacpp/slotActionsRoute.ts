/**
 * llama-server's slot actions, `POST /slots/{id}?action=save|restore|erase` (with `{"filename": …}` for save and
 * restore): save a sequence's KV cache and tokens to a file in the save directory (`serve --slot-save-path`), load one
 * back, or erase what a sequence holds. As llama-server: refused (501) without a save directory, even erase; the slot id
 * wraps around the sequences (its answer names the id given); an action on a busy sequence waits for its request to end.
 */
import path from "node:path";
import {ApiRequestError} from "../../../protocol/openaiFields.js";
import {
    isValidSlotFilename, type LlamaCppSlotErased, type LlamaCppSlotRestored, type LlamaCppSlotSaved
} from "../../../protocol/llamaCppSlots.js";
import {isObject} from "../../../protocol/validation.js";
import type {SlotAction} from "../../../protocol/engineMessages.js";
import {type EngineClient, SlotActionError} from "../engineClient/engineClient.js";

export type SlotActionAnswer = LlamaCppSlotSaved | LlamaCppSlotRestored | LlamaCppSlotErased;

/** Refused as llama-server refuses it, in llama-server's words where it has some. */
function invalid(message: string, param: string | null = null): ApiRequestError {
    return new ApiRequestError(message, param, 400, "invalid_request_error");
}

/** Without a save directory: llama-server's answer. */
export function slotActionsOff(): ApiRequestError {
    return new ApiRequestError("This server does not support slots action. Start it with `--slot-save-path`", null, 501,
        "not_supported_error", "not_supported");
}

/** The slot id in `/slots/{id}`: a decimal integer (llama-server reads it with `stoi`). */
export function parseSlotId(segment: string): number {
    if (!/^-?\d{1,9}$/.test(segment))
        throw invalid("Invalid slot ID");
    return Number(segment);
}

/** The action in `?action=`. */
export function parseSlotAction(value: string | null): SlotAction {
    if (value === "save" || value === "restore" || value === "erase")
        return value;
    throw invalid("Invalid action", "action");
}

/** The file a save or restore names (`{"filename": …}`), in `directory`. */
export function slotFile(body: unknown, directory: string): {filename: string, file: string} {
    const filename = isObject(body) ? body.filename : undefined;
    if (typeof filename !== "string")
        throw invalid("filename: expected a string, the slot file's name in the save directory", "filename");
    if (!isValidSlotFilename(filename))
        throw invalid("Invalid filename", "filename");
    return {filename, file: path.join(directory, filename)};
}

/**
 * Runs one slot action on the engine and answers it in llama-server's shape. `id`: the slot id as given (a negative one
 * names no slot: 400, as llama-server's "Invalid slot ID").
 */
export async function runSlotAction(client: EngineClient, sequences: number, id: number, action: SlotAction,
                                    target: {filename: string, file: string} | undefined): Promise<SlotActionAnswer> {
    if (id < 0)
        throw invalid("Invalid slot ID");
    const sequence = id % Math.max(1, sequences);
    try {
        const done = await client.slotAction(action, sequence, target?.file);
        const ms = Math.round(done.ms * 1000) / 1000;
        if (action === "save")
            return {id_slot: id, filename: target!.filename, n_saved: done.tokens, n_written: done.bytes, timings: {save_ms: ms}};
        if (action === "restore")
            return {id_slot: id, filename: target!.filename, n_restored: done.tokens, n_read: done.bytes, timings: {restore_ms: ms}};
        return {id_slot: id, n_erased: done.tokens};
    } catch (error) {
        if (error instanceof SlotActionError)
            throw error.invalidRequest ? invalid(error.message) : new ApiRequestError(error.message, null, 500, "server_error");
        throw new ApiRequestError(`the slot action failed: ${error instanceof Error ? error.message : String(error)}`, null, 503,
            "unavailable_error", "engine_unavailable");
    }
}
