import fs from "node:fs/promises";
import path from "node:path";
import type {EngineOptions} from "../../../protocol/engineOptions.js";
import {parseEngineToHost} from "../../../protocol/engineMessages.js";
import {ChildProcessTransport} from "./childProcessTransport.js";
import type {EngineExit} from "./engineTransport.js";

/** Text the check tokenizes: ASCII, accents, CJK, emoji, control characters — every kind of byte. */
const probeText = `${Array.from({length: 95}, (_, i) => String.fromCharCode(32 + i)).join("")}\t\n\r\u0000 é ß ü 日本語 ☃ 🦙 \u00ff\u0100`;

/** Files that loaded in a check process this session, by path, size and modification time. */
const checkedFiles = new Set<string>();

/** Why a model file cannot be used; `code` as the engine's loadFailed gives it (e.g. "ENOENT"). */
export class ModelLoadCheckError extends Error {
    override readonly name = "ModelLoadCheckError";

    constructor(message: string, readonly code?: string) {
        super(message);
    }
}

/**
 * Loads `options.modelPath` once in a child engine process — the model, the context and a tokenization
 * of every kind of byte — before an in-process engine loads it: llama.cpp aborts the whole process
 * on some malformed files, which in-process would take the host (in VS Code, the extension host)
 * down with it. Success is remembered per (path, size, mtime) for the session. Rejects with a
 * {@link ModelLoadCheckError}: the engine's own load error, or "the model crashed llama.cpp in a
 * check process" with the exit and the end of its stderr.
 */
export async function checkModelLoadsInChildProcess(options: EngineOptions, entryFile?: string, timeoutMs = 10 * 60_000): Promise<void> {
    if (options.modelPath === undefined)
        return; // the built-in demo model: generated here, not untrusted input
    const key = await fileKey(options.modelPath);
    if (key !== undefined && checkedFiles.has(key))
        return;
    const {statsChannel: _channel, ...rest} = options;
    const transport = new ChildProcessTransport({...rest, statsIntervalMs: 0}, entryFile);
    const outcome = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
            reject(new ModelLoadCheckError(`timed out after ${timeoutMs} ms waiting for a check process to load the model`));
            void transport.shutdown(0);
        }, timeoutMs);
        let loadError: ModelLoadCheckError | undefined;
        let tokenized = false;
        transport.onMessage((raw) => {
            let message;
            try {
                message = parseEngineToHost(raw);
            } catch {
                return;
            }
            if (message.type === "loadFailed")
                loadError = new ModelLoadCheckError(message.error.message, message.error.code);
            else if (message.type === "ready")
                transport.send({type: "countTokens", seq: 0, text: probeText});
            else if (message.type === "tokenCount") {
                tokenized = true;
                transport.send({type: "shutdown"});
            }
        });
        transport.onExit((exit) => {
            clearTimeout(timer);
            if (loadError !== undefined)
                reject(loadError);
            else if (tokenized && exit.code === 0)
                resolve();
            else
                reject(new ModelLoadCheckError(crashMessage(exit, transport.recentStderr())));
        });
    });
    try {
        await outcome;
    } finally {
        await transport.shutdown(3000);
    }
    if (key !== undefined)
        checkedFiles.add(key);
}

async function fileKey(modelPath: string): Promise<string | undefined> {
    const absolute = path.resolve(modelPath);
    try {
        const stat = await fs.stat(absolute);
        return stat.isFile() ? JSON.stringify([absolute, stat.size, stat.mtimeMs]) : undefined;
    } catch {
        return undefined; // the engine itself reports a missing or unreadable file
    }
}

function crashMessage(exit: EngineExit, stderr: string): string {
    const tail = stderr.split("\n").map((line) => line.trim()).filter((line) => line !== "").slice(-5).join("\n");
    return `the model crashed llama.cpp in a check process: ${exit.description}${tail === "" ? "" : `\n${tail}`}`;
}
