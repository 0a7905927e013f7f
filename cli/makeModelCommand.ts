/** `inference-monitor make-model --out FILE [options]`: writes a deterministic demo GGUF model (see engine/model/demoModel.ts). */
import fs from "node:fs/promises";
import path from "node:path";
import {demoModelSizes, writeDemoModel, type DemoModelSize} from "../engine/model/demoModel.js";
import {errorMessage} from "../common/errorMessage.js";
import {formatBytes, formatDuration} from "../common/format.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine, type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {choiceValue, integerValue} from "./optionValues.js";

const sizes = Object.keys(demoModelSizes) as DemoModelSize[];

export const makeModelCommandLine = {
    name: "make-model",
    summary: "write the built-in demo model (a llama-architecture GGUF with seeded random weights)",
    options: {
        out: {type: "string", short: "o", placeholder: "FILE", required: true,
            description: "output file (required; written atomically, parent directories are created)"},
        size: {type: "string", short: "s", placeholder: "SIZE", description: "tiny | small | medium (default: small)"},
        seed: {type: "string", placeholder: "N",
            description: "non-negative integer weight seed (default: 0); same seed → identical bytes"},
        dtype: {type: "string", placeholder: "TYPE", description: "f16 | f32 element type of the weight matrices (default: f16)"}
    },
    details: ["Sizes:", ...Object.values(demoModelSizes).map((info) => `    ${info.description}`)].join("\n")
} satisfies CommandLine<CliOptions>;

type MakeModelOptions = {out: string, size: DemoModelSize, seed: number, dtype: "f16" | "f32"};

function makeModelOptionsFrom(values: OptionValues<typeof makeModelCommandLine.options>): MakeModelOptions {
    return {
        out: values.out!,
        size: choiceValue("size", values.size, sizes, "small"),
        seed: integerValue("seed", values.seed, 0, 0),
        dtype: choiceValue("dtype", values.dtype, ["f16", "f32"], "f16")
    };
}

/** Returns the process exit code: 0 success, 1 write failure, 2 usage error. */
export async function makeModelCommand(args: string[], io: Pick<CliIo, "stdout" | "stderr">): Promise<number> {
    const {stdout, stderr} = io;
    const commandLine = readCommandLine(makeModelCommandLine, args, io, makeModelOptionsFrom);
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {size, seed, dtype} = commandLine.options;

    const file = path.resolve(commandLine.options.out);
    const started = performance.now();
    try {
        await writeDemoModel(file, {size, seed, dtype});
    } catch (error) {
        stderr(`make-model: failed to write ${file}: ${errorMessage(error)}\n`);
        return 1;
    }
    const tookMs = performance.now() - started;
    const {size: bytes} = await fs.stat(file);
    stdout([
        `Wrote ${file}`,
        `  model:      demo ${size}, seed ${seed}, ${dtype}`,
        `  parameters: ${demoModelSizes[size].parameterCount.toLocaleString("en-US")}`,
        `  file size:  ${bytes.toLocaleString("en-US")} bytes (${formatBytes(bytes)})`,
        `  took:       ${formatDuration(tookMs)}`,
        ""
    ].join("\n"));
    return 0;
}
