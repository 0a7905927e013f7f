/**
 * The benchmark scripts' flags, read the product CLI's way (cli/commandLine.ts): each script declares its options once,
 * with a placeholder and a description, and gets `--help` and usage errors from that declaration. Raw parseArgs would
 * answer `--help` or a typo with a TypeError stack trace, and say nothing of the flags a script takes.
 */
import {readCommandLine, UsageError, type CliOptions, type CommandLine, type OptionValues} from "../cli/commandLine.js";

/**
 * This process's flags against `script` (its `name`: the npm script, `bench:peer`), turned into the script's settings by
 * `interpret`: it checks and converts every value and applies the defaults, throwing UsageError (cli/optionValues.ts'
 * helpers do) for a bad one. After `--help` prints the help and exits 0; after a usage error, an unknown flag or a bad
 * value, prints `npm run bench:x --: <message>` and the help on stderr and exits 2.
 */
export function readScriptCommandLine<Options extends CliOptions, Parsed>(script: Omit<CommandLine<Options>, "program">,
                                                                          interpret: (values: OptionValues<Options>) => Parsed): Parsed {
    const command: CommandLine<Options> = {...script, program: "npm run", name: `${script.name} --`};
    const commandLine = readCommandLine(command, process.argv.slice(2), {
        stdout: (text) => void process.stdout.write(text),
        stderr: (text) => void process.stderr.write(text)
    }, interpret);
    // Exit here, not later: the script's top level goes on to run the benchmark, or to run itself again in a child.
    if ("exitCode" in commandLine)
        process.exit(commandLine.exitCode);
    return commandLine.options;
}

/**
 * A comma-separated list (items trimmed), each item read by `item` (undefined: not a valid one); `fallback` when the flag
 * is absent. An empty or invalid item, or with `distinct` one given twice, is a UsageError: `--name must be <what>, got "…"`.
 */
export function listValue<Item>(name: string, raw: string | undefined, fallback: NoInfer<Item>[], what: string,
                                item: (text: string) => Item | undefined, distinct = false): Item[] {
    if (raw === undefined)
        return fallback;
    const items = raw.split(",").map((text) => item(text.trim()));
    if (items.some((value) => value === undefined) || (distinct && new Set(items).size !== items.length))
        throw new UsageError(`--${name} must be ${what}, got ${JSON.stringify(raw)}`);
    return items as Item[];
}

/** An integer >= 1 (a list item's text), else undefined. */
export function positiveInteger(text: string): number | undefined {
    const value = text === "" ? NaN : Number(text);
    return Number.isSafeInteger(value) && value >= 1 ? value : undefined;
}

/** One of `choices` (a list item's text), else undefined. */
export function choiceItem<Choice extends string>(choices: readonly Choice[]): (text: string) => Choice | undefined {
    return (text) => (choices as readonly string[]).includes(text) ? text as Choice : undefined;
}
