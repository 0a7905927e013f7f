/**
 * `inference-monitor make-model --out FILE [--size tiny|small|medium] [--seed N] [--dtype f16|f32]`
 *
 * Writes a deterministic demo GGUF model (see engine/model/demoModel.ts).
 */
import fs from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { demoModelSizes, isDemoModelSize, writeDemoModel } from "../engine/model/demoModel";
import {errorMessage} from "../common/errorMessage.js";

/** Where the command writes; defaults to the process streams. */
export interface CommandIo {
    /** Receives normal output (one or more complete lines). Default: process.stdout. */
    readonly stdout?: (s: string) => void;
    /** Receives errors and usage text. Default: process.stderr. */
    readonly stderr?: (s: string) => void;
}

export function makeModelUsage(): string {
    const sizes = Object.values(demoModelSizes)
        .map((info) => `    ${info.description}`)
        .join("\n");
    return [
        "Usage: inference-monitor make-model --out FILE [--size tiny|small|medium] [--seed N] [--dtype f16|f32]",
        "",
        "Writes a deterministic, randomly initialised llama-architecture GGUF model for demos and benchmarks.",
        "",
        "Options:",
        "  -o, --out FILE     output file (required; written atomically, parent directories are created)",
        "  -s, --size SIZE    tiny | small | medium (default: small)",
        "      --seed N       non-negative integer weight seed (default: 0); same seed → identical bytes",
        "      --dtype TYPE   f16 | f32 element type of the weight matrices (default: f16)",
        "  -h, --help         show this help",
        "",
        "Sizes:",
        sizes,
        "",
    ].join("\n");
}

/** Returns the process exit code: 0 success, 1 write failure, 2 usage error. */
export async function makeModelCommand(args: string[], io: CommandIo = {}): Promise<number> {
    const stdout = io.stdout ?? ((s: string) => void process.stdout.write(s));
    const stderr = io.stderr ?? ((s: string) => void process.stderr.write(s));
    const usageError = (message: string): number => {
        stderr(`make-model: ${message}\n\n${makeModelUsage()}`);
        return 2;
    };

    let values: { out?: string; size?: string; seed?: string; dtype?: string; help?: boolean };
    try {
        ({ values } = parseArgs({
            args,
            strict: true,
            allowPositionals: false,
            options: {
                out: { type: "string", short: "o" },
                size: { type: "string", short: "s" },
                seed: { type: "string" },
                dtype: { type: "string" },
                help: { type: "boolean", short: "h" },
            },
        }));
    } catch (error) {
        return usageError(errorMessage(error));
    }

    if (values.help) {
        stdout(makeModelUsage());
        return 0;
    }
    if (values.out === undefined || values.out === "") return usageError("--out FILE is required");
    const size = values.size ?? "small";
    if (!isDemoModelSize(size)) return usageError(`invalid --size ${JSON.stringify(size)} (expected tiny, small or medium)`);
    const seedText = values.seed ?? "0";
    const seed = /^\d+$/.test(seedText) ? Number(seedText) : NaN;
    if (!Number.isSafeInteger(seed)) return usageError(`invalid --seed ${JSON.stringify(seedText)} (expected a non-negative integer)`);
    const dtype = values.dtype ?? "f16";
    if (dtype !== "f16" && dtype !== "f32") return usageError(`invalid --dtype ${JSON.stringify(dtype)} (expected f16 or f32)`);

    const file = path.resolve(values.out);
    const started = performance.now();
    try {
        await writeDemoModel(file, { size, seed, dtype });
    } catch (error) {
        stderr(`make-model: failed to write ${file}: ${errorMessage(error)}\n`);
        return 1;
    }
    const seconds = (performance.now() - started) / 1000;
    const { size: bytes } = await fs.stat(file);
    stdout(
        [
            `Wrote ${file}`,
            `  model:      demo ${size}, seed ${seed}, ${dtype}`,
            `  parameters: ${demoModelSizes[size].parameterCount.toLocaleString("en-US")}`,
            `  file size:  ${bytes.toLocaleString("en-US")} bytes (${(bytes / 2 ** 20).toFixed(1)} MiB)`,
            `  took:       ${seconds.toFixed(2)} s`,
            "",
        ].join("\n"),
    );
    return 0;
}
