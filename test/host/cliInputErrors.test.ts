/**
 * A negative number given to a numeric flag gets the flag's own message ("--threads must be …"), not
 * parseArgs' "argument is ambiguous", whether written `--threads -1` or `--threads=-1`; a flag that takes -1 as a value
 * (`--sse-ping-interval`, as llama-server's) takes it either way.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {benchCommandLine, benchOptionsFrom} from "../../cli/benchArgs.js";
import {readCommandLine, type CliOptions, type CommandLine, type OptionValues} from "../../cli/commandLine.js";
import {demoCommandLine, demoOptionsFrom} from "../../cli/demoArgs.js";
import {proxyCommandLine, proxyOptionsFrom} from "../../cli/proxyArgs.js";
import {serveCommandLine, serveOptionsFrom} from "../../cli/serveArgs.js";
import {watchCommandLine, watchOptionsFrom} from "../../cli/watchArgs.js";

type Command = {
    command: CommandLine<CliOptions>,
    /** Arguments the command needs besides the flag under test. */
    required: string[],
    interpret: (values: OptionValues<CliOptions>, positionals: string[]) => unknown
};

const commands: Command[] = [
    {command: serveCommandLine, required: [], interpret: (values) => serveOptionsFrom(values, {})},
    {command: benchCommandLine, required: [], interpret: (values) => benchOptionsFrom(values, false, {})},
    {command: demoCommandLine, required: [], interpret: (values) => demoOptionsFrom(values)},
    {command: proxyCommandLine, required: ["--upstream", "http://127.0.0.1:1"], interpret: (values) => proxyOptionsFrom(values)},
    {command: watchCommandLine, required: ["http://127.0.0.1:1"], interpret: (values, urls) => watchOptionsFrom(values, urls, {})}
];

/** Flags whose placeholder is a number: N, S (seconds), R (rate), MS. */
function numericFlags(command: CommandLine<CliOptions>): string[] {
    return Object.entries(command.options).flatMap(([name, option]) =>
        option.type === "string" && ["N", "S", "R", "MS"].includes(option.placeholder) ? [name] : []);
}

function run({command, required, interpret}: Command, args: string[]): {exitCode: number, stderr: string} {
    let stderr = "";
    const io = {stdout: () => undefined, stderr: (text: string) => void (stderr += text)};
    const result = readCommandLine(command, [...required, ...args], io, interpret);
    return {exitCode: "exitCode" in result ? result.exitCode : 0, stderr};
}

describe("negative numbers for numeric flags", () => {
    for (const entry of commands) {
        test(`${entry.command.name}: every numeric flag says what it needs`, () => {
            const flags = numericFlags(entry.command);
            assert.ok(flags.length > 0);
            for (const flag of flags) {
                // A flag that takes -1 (llama.cpp's "never", said in its description) takes it either way, and refuses -2.
                const takesMinusOne = / -1 = /.test(entry.command.options[flag]!.description);
                if (takesMinusOne)
                    for (const args of [[`--${flag}`, "-1"], [`--${flag}=-1`]])
                        assert.equal(run(entry, args).exitCode, 0, args.join(" "));
                const negative = takesMinusOne ? "-2" : "-1";
                for (const args of [[`--${flag}`, negative], [`--${flag}=${negative}`], [`--${flag}`, "-0.5"]]) {
                    const {exitCode, stderr} = run(entry, args);
                    const firstLine = stderr.split("\n")[0]!;
                    assert.equal(exitCode, 2, `${args.join(" ")}: ${firstLine}`);
                    assert.match(firstLine, new RegExp(`^inference-monitor ${entry.command.name}: --${flag} must be .*, got "${args.at(-1)!.replace(/^.*=/, "")}"$`),
                        args.join(" "));
                }
            }
        });
    }

    test("a value that only looks like a flag is still refused as one", () => {
        const {exitCode, stderr} = run(commands[0]!, ["--threads", "--parallel"]);
        assert.equal(exitCode, 2);
        assert.match(stderr, /argument is ambiguous/);
    });
});

describe("--tile-padding (serve and bench)", () => {
    test("on by default, off when asked; anything else is a usage error; bench refuses it with --base-url", () => {
        const parse = (args: string[], command: "serve" | "bench"): boolean | string => {
            let stderr = "";
            const io = {stdout: () => undefined, stderr: (text: string) => void (stderr += text)};
            const result = command === "serve"
                ? readCommandLine(serveCommandLine, args, io, (parsed) => serveOptionsFrom(parsed, {}))
                : readCommandLine(benchCommandLine, args, io, (parsed) => benchOptionsFrom(parsed, false, {}));
            return "exitCode" in result ? stderr : result.options.tilePadding;
        };
        for (const command of ["serve", "bench"] as const) {
            assert.equal(parse([], command), true);
            assert.equal(parse(["--tile-padding", "on"], command), true);
            assert.equal(parse(["--tile-padding", "off"], command), false);
            assert.match(String(parse(["--tile-padding", "yes"], command)), /--tile-padding/);
        }
        assert.match(String(parse(["--base-url", "http://127.0.0.1:1/v1", "--tile-padding", "off"], "bench")),
            /--tile-padding configures the local engine/);
    });
});

describe("serve --slot-save-path", () => {
    test("takes an existing directory, as an absolute path; anything else is a usage error naming the flag", () => {
        const parse = (args: string[]): {options?: ReturnType<typeof serveOptionsFrom>, stderr: string} => {
            let stderr = "";
            const result = readCommandLine(serveCommandLine, args, {stdout: () => undefined, stderr: (text) => void (stderr += text)},
                (parsed) => serveOptionsFrom(parsed, {}));
            return "exitCode" in result ? {stderr} : {options: result.options, stderr};
        };
        const given = parse(["--slot-save-path", "."]);
        assert.equal(given.options?.slotSavePath, process.cwd(), given.stderr);
        assert.equal(parse([]).options?.slotSavePath, undefined);
        for (const bad of ["/no/such/directory", "package.json"]) {
            const refused = parse(["--slot-save-path", bad]);
            assert.equal(refused.options, undefined);
            assert.match(refused.stderr, /--slot-save-path must be an existing directory, got/);
        }
    });
});
