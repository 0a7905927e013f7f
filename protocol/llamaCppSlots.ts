/**
 * llama.cpp's server's `GET /slots`: one entry per sequence ("slot"), what it runs or last ran. Load balancers (capacity-
 * aware routing with `?fail_on_no_slot=1`), dashboards and GUIs read it. Declared once: our server answers it and our
 * "Attach to Server…" reads llama-server's with `parseLlamaCppSlots`.
 */
import type {LlamaCppDefaultParams} from "./llamaCppProps.js";
import {expectNumber, expectObject, isObject, optionalInteger, ProtocolError} from "./validation.js";

/** A request's sampling settings in a slot: llama-server's `params` (without the texts it leaves out: stop strings). */
export type LlamaCppSlotParams = Omit<LlamaCppDefaultParams, "stream"> & {max_tokens: number};

/** The request a slot runs (or last ran): llama-server's `next_token` entry. */
export type LlamaCppNextToken = {
    /** Whether the request is still generating. */
    has_next_token: boolean,
    /** Whether its output so far has a line break. */
    has_new_line: boolean,
    /** Tokens it may still generate. */
    n_remain: number,
    n_decoded: number
};

/**
 * One slot, as llama-server writes it by default (without `LLAMA_SERVER_SLOTS_DEBUG`: no prompt or output text). The
 * request fields are there once the slot has run a request.
 */
export type LlamaCppSlot = {
    id: number,
    /** Tokens the slot holds (its context). */
    n_ctx: number,
    speculative: false,
    is_processing: boolean,
    id_task?: number,
    /** Tokens the slot holds: the prompt, then each decoded token too; once the request ends, what stays cached (0: none). */
    n_prompt_tokens?: number,
    /** Prompt tokens evaluated (the prompt less those found cached). */
    n_prompt_tokens_processed?: number,
    /** Prompt tokens found in the slot's KV cache (the prefix cache). */
    n_prompt_tokens_cache?: number,
    params?: LlamaCppSlotParams,
    next_token?: [LlamaCppNextToken]
};

/**
 * What a reader of a llama-server's `/slots` uses of each slot (older versions lack some fields: 0 then). `promptTokens`:
 * `n_prompt_tokens`, the tokens the slot holds.
 */
export type LlamaCppSlotReading = {id: number, nCtx: number, processing: boolean, promptTokens: number, decoded: number};

/** More slots than any server runs: a longer answer is not read. */
const maxSlots = 4096;

/** A `/slots` answer (parsed JSON), as read from any llama.cpp server version; throws ProtocolError naming what is wrong. */
export function parseLlamaCppSlots(json: unknown): LlamaCppSlotReading[] {
    if (!Array.isArray(json))
        throw new ProtocolError("/slots is not a list of slots");
    if (json.length > maxSlots)
        throw new ProtocolError(`/slots lists ${json.length} slots (at most ${maxSlots} are read)`);
    return json.map((value: unknown, i) => {
        const what = `/slots[${i}]`;
        const slot = expectObject(value, what);
        if (typeof slot.is_processing !== "boolean")
            throw new ProtocolError(`${what}.is_processing: expected a boolean`);
        const next: unknown = Array.isArray(slot.next_token) ? slot.next_token[0] : undefined;
        const decoded = isObject(next) ? optionalInteger(next, "n_decoded", `${what}.next_token[0]`) : undefined;
        return {id: optionalInteger(slot, "id", what) ?? i, nCtx: expectNumber(slot, "n_ctx", what), processing: slot.is_processing,
            promptTokens: optionalInteger(slot, "n_prompt_tokens", what) ?? 0, decoded: decoded ?? 0};
    });
}

/** `POST /slots/{id}?action=save`'s answer: the tokens the slot held, the bytes written, how long it took. */
export type LlamaCppSlotSaved = {id_slot: number, filename: string, n_saved: number, n_written: number, timings: {save_ms: number}};
/** `POST /slots/{id}?action=restore`'s answer: the tokens the slot holds now, the bytes read, how long it took. */
export type LlamaCppSlotRestored = {id_slot: number, filename: string, n_restored: number, n_read: number, timings: {restore_ms: number}};
/** `POST /slots/{id}?action=erase`'s answer: the tokens the slot held. */
export type LlamaCppSlotErased = {id_slot: number, n_erased: number};

/** Characters llama-server refuses in a slot file's name besides controls and separators (reserved on some file systems). */
const forbiddenFilenameCharacters = new Set([":", "*", "?", "\"", "<", ">", "|", "/", "\\"]);
/** Code points that stand in for a forbidden character or mark broken text (lookalike separators, BOM, replacement). */
const forbiddenFilenameCodePoints = new Set([0xff0e, 0x2215, 0x2216, 0xfffd, 0xfeff]);

/**
 * Whether `name` may name a slot file in the save directory: llama-server's rules (its `fs_validate_filename`), so a name
 * one server takes the other takes too: 1–255 bytes of UTF-8, no control characters, path separators or characters
 * Windows reserves, no lookalikes of them, no "..", no leading or trailing space, no trailing dot.
 */
export function isValidSlotFilename(name: string): boolean {
    if (name === "" || Buffer.byteLength(name, "utf8") > 255 || name === "." || name.includes(".."))
        return false;
    if (name.startsWith(" ") || name.endsWith(" ") || name.endsWith("."))
        return false;
    for (const character of name) {
        const code = character.codePointAt(0)!;
        if (code <= 0x1f || (code >= 0x7f && code <= 0x9f) || (code >= 0xd800 && code <= 0xdfff) ||
            forbiddenFilenameCodePoints.has(code) || forbiddenFilenameCharacters.has(character))
            return false;
    }
    return true;
}
