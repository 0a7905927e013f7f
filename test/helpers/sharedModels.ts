/**
 * Real trained models shared beside the clone (never copied into the repository, never needed by the
 * product): `stories260K.gguf`, a 260K-parameter llama trained on TinyStories, with a SentencePiece
 * vocabulary and byte-fallback tokens.
 */
import {existsSync} from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";

/** Overrides the search for stories260K.gguf. */
export const storiesModelEnvVar = "INFERENCE_MONITOR_STORIES_GGUF";
const storiesRelativePath = path.join("shared", "models", "stories260K.gguf");
const repoRoot = path.resolve(__dirname, "../..");

/** `dir`, its parent, …, up to the filesystem root. */
function selfAndAncestors(dir: string): string[] {
    const dirs = [dir];
    while (path.dirname(dirs.at(-1)!) !== dirs.at(-1))
        dirs.push(path.dirname(dirs.at(-1)!));
    return dirs;
}

export type SharedModel = {path: string, missing?: undefined} | {path?: undefined, missing: string};

/**
 * stories260K.gguf: `$INFERENCE_MONITOR_STORIES_GGUF` when set, else the first `shared/models/stories260K.gguf`
 * found walking up from the repository's parent directory (CI checks `../shared` out beside the clone),
 * else /work/shared (this workplace's, for a clone in a temporary folder).
 * When absent, `missing` says where it was looked for.
 */
export function findStoriesModel(env: NodeJS.ProcessEnv = process.env): SharedModel {
    const fromEnv = env[storiesModelEnvVar];
    if (fromEnv !== undefined && fromEnv !== "")
        return existsSync(fromEnv) ? {path: path.resolve(fromEnv)} : {missing: `${storiesModelEnvVar}=${fromEnv} does not exist`};
    // Last, this workplace's shared folder, for a clone made elsewhere (e.g. `git clone . $(mktemp -d)`).
    const candidates = [...selfAndAncestors(path.dirname(repoRoot)), "/work"].map((dir) => path.join(dir, storiesRelativePath));
    const found = candidates.find((candidate) => existsSync(candidate));
    if (found !== undefined)
        return {path: found};
    return {missing: `stories260K.gguf: no ${storiesRelativePath} above ${repoRoot} (set ${storiesModelEnvVar} to its path)`};
}

/** The stories260K path to use: the one found, else where it is expected (which then does not exist). */
export const stories260KPath: string = findStoriesModel().path ?? path.resolve(repoRoot, "..", storiesRelativePath);

/**
 * A copy of the GGUF at `source`, written to `target`, whose `tokenizer.ggml.eos_token_id` (a uint32) is
 * `eosId`: the value is patched in place, so every offset stays. stories260K comes from llama2.c, whose
 * training data separates stories with `<s>` (id 1), never `</s>`: it ends a story by sampling `<s>`, which
 * llama.cpp (like its server) does not treat as end of generation unless the file declares it the EOS.
 */
export async function copyWithEosTokenId(source: string, target: string, eosId: number): Promise<void> {
    const bytes = await fs.readFile(source);
    const key = Buffer.from("tokenizer.ggml.eos_token_id", "utf8");
    const keyAt = bytes.indexOf(key);
    const typeAt = keyAt + key.length;
    if (keyAt < 8 || bytes.readBigUInt64LE(keyAt - 8) !== BigInt(key.length) || bytes.readUInt32LE(typeAt) !== ggufUint32Type)
        throw new Error(`${source}: no uint32 tokenizer.ggml.eos_token_id to patch`);
    bytes.writeUInt32LE(eosId, typeAt + 4);
    await fs.writeFile(target, bytes);
}

const ggufUint32Type = 4;
