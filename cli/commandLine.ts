/**
 * The one way a command takes arguments: it declares its options once — node:util parseArgs' spec
 * plus a placeholder and a description each — and this file derives from that declaration both the
 * parsing and the `--help` text. `--help`/`-h` prints the help (exit 0); an unknown flag, a missing
 * value or a bad one prints `inference-monitor <command>: <message naming the flag>` and the help to
 * stderr (exit 2). The benchmark scripts use it too (scripts/scriptCommandLine.ts), under their own
 * program name (`npm run bench:peer --`).
 */
import {parseArgs} from "node:util";
import {errorMessage} from "../common/errorMessage.js";
import type {CliIo} from "./cliIo.js";
import {joinNegativeNumberValues} from "./optionValues.js";

export type CliOption =
    | {type: "string", short?: string, placeholder: string, description: string, required?: boolean}
    | {type: "boolean", short?: string, description: string};

export type CliOptions = Record<string, CliOption>;

export type CommandLine<Options extends CliOptions> = {
    /**
     * What the user types before the command's name: `inference-monitor` unless given. A benchmark script says
     * `npm run` (its name `bench:peer --`), so that its help and its usage errors show the command line to type.
     */
    program?: string,
    /** The command after the program. */
    name: string,
    /** One line, for the command list and the help. */
    summary: string,
    options: Options,
    /** Text after the options (e.g. the demo model sizes). */
    details?: string,
    /** Arguments that are not flags (e.g. `watch URL…`): how the help names them, and how many are needed. */
    positionals?: {placeholder: string, min: number}
};

/** The parsed flags: strings as given (the command checks and converts them), booleans true when present. */
export type OptionValues<Options extends CliOptions> = {
    [Name in keyof Options]?: Options[Name]["type"] extends "boolean" ? boolean : string
};

/** A bad command line: exit code 2, the message and the command's help on stderr. */
export class UsageError extends Error {
    override readonly name = "UsageError";
}

const helpOption: CliOption = {type: "boolean", short: "h", description: "show this help"};

function program(command: CommandLine<CliOptions>): string {
    return command.program ?? "inference-monitor";
}

/** The command as typed, without its flags: `inference-monitor bench`, `npm run bench:peer --`. */
function invocation(command: CommandLine<CliOptions>): string {
    return `${program(command)} ${command.name}`;
}

/** The command's usage after the program: its name, the positionals and the required flags. */
function commandUsage(command: CommandLine<CliOptions>): string {
    const required = Object.entries(command.options).flatMap(([name, option]) =>
        option.type === "string" && option.required === true ? [`--${name} ${option.placeholder}`] : []);
    const positionals = command.positionals !== undefined ? [command.positionals.placeholder] : [];
    return [command.name, ...positionals, ...required, "[options]"].join(" ");
}

function synopsis(command: CommandLine<CliOptions>): string {
    return `${program(command)} ${commandUsage(command)}`;
}

/** `--help` for a command, from its declaration. */
function commandHelp(command: CommandLine<CliOptions>): string {
    const rows = Object.entries({...command.options, help: helpOption}).map(([name, option]) => {
        const short = option.short !== undefined ? `-${option.short}, ` : "    ";
        return [`${short}--${name}${option.type === "string" ? ` ${option.placeholder}` : ""}`, option.description] as const;
    });
    const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
    return [
        `Usage: ${synopsis(command)}`, "", command.summary, "", "Options:",
        ...rows.map(([flag, description]) => `  ${flag.padEnd(width)}${description}`),
        ...(command.details !== undefined ? ["", command.details] : []), ""
    ].join("\n");
}

/** The command list for `inference-monitor --help`. */
export function commandList(commands: ReadonlyArray<CommandLine<CliOptions>>): string {
    return commands.map((command) => `  ${commandUsage(command)}\n${" ".repeat(17)}${command.summary}\n`).join("");
}

/** Parses `args` against the declaration; throws UsageError naming the flag. `help` is true when --help/-h was given. */
export function parseCommandArgs<Options extends CliOptions>(command: CommandLine<Options>, args: string[]):
{help: boolean, values: OptionValues<Options>, positionals: string[]} {
    const spec = Object.fromEntries(Object.entries({...command.options, help: helpOption}).map(([name, option]) =>
        [name, option.short !== undefined ? {type: option.type, short: option.short} : {type: option.type}]));
    let values: Record<string, string | boolean | undefined>;
    let positionals: string[];
    try {
        const valueOptions = new Set(Object.entries(command.options).flatMap(([name, option]) => option.type === "string" ? [name] : []));
        ({values, positionals} = parseArgs({
            args: joinNegativeNumberValues(args, valueOptions), options: spec, strict: true,
            allowPositionals: command.positionals !== undefined
        }));
    } catch (error) {
        if (args.includes("--help") || args.includes("-h"))
            return {help: true, values: {}, positionals: []};
        throw new UsageError(errorMessage(error));
    }
    if (values.help === true)
        return {help: true, values: {}, positionals: []};
    if (command.positionals !== undefined && positionals.length < command.positionals.min)
        throw new UsageError(`${command.positionals.placeholder} is required`);
    for (const [name, option] of Object.entries(command.options))
        if (option.type === "string" && option.required === true && (values[name] === undefined || values[name] === ""))
            throw new UsageError(`--${name} ${option.placeholder} is required`);
    delete values.help;
    return {help: false, values: values as OptionValues<Options>, positionals};
}

/**
 * Reads a command line the one way: `interpret` turns the parsed flags into the command's options
 * and throws UsageError for a bad value. Returns the options, or the exit code when there is
 * nothing to run (0 after --help, 2 after a usage error; both already printed).
 */
export function readCommandLine<Options extends CliOptions, Parsed>(command: CommandLine<Options>, args: string[],
                                                                    io: Pick<CliIo, "stdout" | "stderr">, interpret: (values: OptionValues<Options>, positionals: string[]) => Parsed): {options: Parsed} | {exitCode: number} {
    try {
        const {help, values, positionals} = parseCommandArgs(command, args);
        if (help) {
            io.stdout(commandHelp(command));
            return {exitCode: 0};
        }
        return {options: interpret(values, positionals)};
    } catch (error) {
        if (!(error instanceof UsageError))
            throw error;
        io.stderr(`${invocation(command)}: ${error.message}\n\n${commandHelp(command)}`);
        return {exitCode: 2};
    }
}
