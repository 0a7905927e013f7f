/** `inference-monitor` command line: dispatches to one command per file. */
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {benchCommandLine} from "./benchArgs.js";
import {benchCommand} from "./benchCommand.js";
import type {CliIo} from "./cliIo.js";
import {commandList, type CliOptions, type CommandLine} from "./commandLine.js";
import {demoCommandLine} from "./demoArgs.js";
import {demoCommand} from "./demoCommand.js";
import {makeModelCommand, makeModelCommandLine} from "./makeModelCommand.js";
import {proxyCommandLine} from "./proxyArgs.js";
import {proxyCommand} from "./proxyCommand.js";
import {serveCommandLine} from "./serveArgs.js";
import {serveCommand} from "./serveCommand.js";
import {watchCommandLine} from "./watchArgs.js";
import {watchCommand} from "./watchCommand.js";

const io: CliIo = {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    isTty: process.stderr.isTTY === true
};

type Command = {commandLine: CommandLine<CliOptions>, run: (args: string[]) => Promise<number>};

const commands: Command[] = [
    {commandLine: makeModelCommandLine, run: (args) => makeModelCommand(args, io)},
    {commandLine: benchCommandLine, run: (args) => benchCommand(args, io, async (client, options) => {
        const pipeline = await StatsPipeline.create({
            writeLogLine: (line) => io.stderr(`${line}\n`), prometheusPort: options.prometheusPort
        });
        pipeline.attach(client);
        if (pipeline.metricsUrl !== undefined)
            io.stderr(`Prometheus metrics at ${pipeline.metricsUrl}\n`);
        return pipeline;
    })},
    {commandLine: demoCommandLine, run: (args) => demoCommand(args, io)},
    {commandLine: serveCommandLine, run: (args) => serveCommand(args, io)},
    {commandLine: watchCommandLine, run: (args) => watchCommand(args, io)},
    {commandLine: proxyCommandLine, run: (args) => proxyCommand(args, io)}
];

const usage = `Usage: inference-monitor <command> [options]

Commands:
${commandList(commands.map((command) => command.commandLine))}
inference-monitor <command> --help lists a command's options.
`;

async function main(argv: string[]): Promise<number> {
    const [name, ...args] = argv;
    if (name === undefined || name === "--help" || name === "-h") {
        process.stdout.write(usage);
        return name === undefined ? 2 : 0;
    }
    const command = commands.find((candidate) => candidate.commandLine.name === name);
    if (command === undefined) {
        process.stderr.write(`Unknown command: ${name}\n\n${usage}`);
        return 2;
    }
    return await command.run(args);
}

main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
}, (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
    process.exitCode = 1;
});
