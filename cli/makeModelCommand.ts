/** `inference-monitor make-model --out FILE [options]`: writes a deterministic demo GGUF model (see engine/model/demoModel.ts). */
import fs from "node:fs/promises";
import path from "node:path";
import {
    defaultDemoContextLength,
    demoChatTemplates,
    demoModelDtypes,
    demoModelSizeNames,
    demoModelSizes,
    writeDemoModel,
    type DemoChatTemplateName,
    type DemoModelDtype,
    type DemoModelSize
} from "../engine/model/demoModel.js";
import {errorMessage} from "../common/errorMessage.js";
import {formatBytes, formatDuration} from "../common/format.js";
import type {CliIo} from "./cliIo.js";
import {readCommandLine, UsageError, type CliOptions, type CommandLine, type OptionValues} from "./commandLine.js";
import {choiceValue, integerValue} from "./optionValues.js";


export const makeModelCommandLine = {
    name: "make-model",
    summary: "write the built-in demo model (a llama-architecture GGUF with seeded random weights)",
    options: {
        "out": {type: "string", short: "o", placeholder: "FILE", required: true,
            description: "output file (required; written atomically, parent directories are created)"},
        "size": {type: "string", short: "s", placeholder: "SIZE", description: "tiny | small | medium (default: small)"},
        "seed": {type: "string", placeholder: "N",
            description: "non-negative integer weight seed (default: 0); same seed → identical bytes"},
        "dtype": {type: "string", placeholder: "TYPE",
            description: "f16 | f32 | q8_0 | q4_0 storage type of the weight matrices (default: f16; q4_0 keeps output.weight in q8_0)"},
        "chat-template": {type: "string", placeholder: "NAME|FILE",
            description: `store a Jinja chat template (tokenizer.chat_template): ${Object.keys(demoChatTemplates).join(" | ")} (built in), or a file`},
        "context-length": {type: "string", placeholder: "N",
            description: `the context length it declares, a power of two from 256 to 131072 (default: ${defaultDemoContextLength}; same weights)`},
        "fim": {type: "boolean", description: "add fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>): a completion's suffix works"},
        "fim-repo": {type: "boolean",
            description: "--fim plus Qwen2.5-Coder's repository-level tokens (<|repo_name|>, <|file_sep|>): /infill puts other files in the repo-level pattern"}
    },
    details: ["Sizes:", ...Object.values(demoModelSizes).map((info) => `    ${info.description}`)].join("\n")
} satisfies CommandLine<CliOptions>;

type MakeModelOptions = {out: string, size: DemoModelSize, seed: number, dtype: DemoModelDtype, chatTemplate: string | undefined,
    contextLength: number, fillInMiddle: boolean | "repo"};

function makeModelOptionsFrom(values: OptionValues<typeof makeModelCommandLine.options>): MakeModelOptions {
    const contextLength = integerValue("context-length", values["context-length"], defaultDemoContextLength, 256, 131072);
    if ((contextLength & (contextLength - 1)) !== 0)
        throw new UsageError(`--context-length must be a power of two, got ${contextLength}`);
    return {
        out: values.out!,
        size: choiceValue("size", values.size, demoModelSizeNames, "small"),
        seed: integerValue("seed", values.seed, 0, 0),
        dtype: choiceValue("dtype", values.dtype, demoModelDtypes, "f16"),
        chatTemplate: values["chat-template"],
        contextLength,
        fillInMiddle: values["fim-repo"] === true ? "repo" : values.fim === true
    };
}

/** Returns the process exit code: 0 success, 1 write failure, 2 usage error. */
export async function makeModelCommand(args: string[], io: Pick<CliIo, "stdout" | "stderr">): Promise<number> {
    const {stdout, stderr} = io;
    const commandLine = readCommandLine(makeModelCommandLine, args, io, makeModelOptionsFrom);
    if ("exitCode" in commandLine)
        return commandLine.exitCode;
    const {size, seed, dtype, contextLength, fillInMiddle} = commandLine.options;
    const chatTemplate = await readChatTemplate(commandLine.options.chatTemplate);
    if (typeof chatTemplate === "object") {
        stderr(`make-model: cannot read the chat template ${commandLine.options.chatTemplate}: ${chatTemplate.error}\n`);
        return 2;
    }

    const file = path.resolve(commandLine.options.out);
    const started = performance.now();
    try {
        await writeDemoModel(file, {size, seed, dtype, chatTemplate, contextLength, fillInMiddle});
    } catch (error) {
        stderr(`make-model: failed to write ${file}: ${errorMessage(error)}\n`);
        return 1;
    }
    const tookMs = performance.now() - started;
    const {size: bytes} = await fs.stat(file);
    stdout([
        `Wrote ${file}`,
        `  model:      demo ${size}, seed ${seed}, ${dtype}${chatTemplate === undefined ? "" : `, chat template ${commandLine.options.chatTemplate}`}` +
            (contextLength === defaultDemoContextLength ? "" : `, context ${contextLength}`) + (fillInMiddle === "repo" ? ", fill-in-the-middle and repository-level tokens" : fillInMiddle ? ", fill-in-the-middle tokens" : ""),
        `  parameters: ${demoModelSizes[size].parameterCount.toLocaleString("en-US")}`,
        `  file size:  ${bytes.toLocaleString("en-US")} bytes (${formatBytes(bytes)})`,
        `  took:       ${formatDuration(tookMs)}`,
        ""
    ].join("\n"));
    return 0;
}

/** A built-in template's text, a file's text, or why the file could not be read. */
async function readChatTemplate(nameOrFile: string | undefined): Promise<string | undefined | {error: string}> {
    if (nameOrFile === undefined)
        return undefined;
    if (Object.prototype.hasOwnProperty.call(demoChatTemplates, nameOrFile))
        return demoChatTemplates[nameOrFile as DemoChatTemplateName];
    try {
        return await fs.readFile(nameOrFile, "utf8");
    } catch (error) {
        return {error: errorMessage(error)};
    }
}
