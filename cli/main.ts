/** `inference-monitor` command line: dispatches to one command per file. */
import {StatsPipeline} from "../extension/host/stats/statsPipeline.js";
import {benchCommand, type CliIo} from "./benchCommand.js";
import {demoCommand} from "./demoCommand.js";
import {makeModelCommand} from "./makeModelCommand.js";

const usage = `Usage: inference-monitor <command> [options]

Commands:
  make-model --out FILE [--size tiny|small|medium] [--seed N] [--dtype f16|f32]
                 write the built-in demo model (a GGUF with seeded random weights)
  bench [options]
                 vLLM-style serving benchmark on the engine (bench --help for options)
  demo [--model FILE] [--port N] [--duration S]
                 serve the live dashboard while driving a mixed workload
`;

const io: CliIo = {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    isTty: process.stderr.isTTY === true
};

type Command = (args: string[]) => Promise<number>;

const commands: Record<string, Command> = {
    "make-model": (args) => makeModelCommand(args),
    "bench": (args) => benchCommand(args, io, async (client, options) => {
        const pipeline = await StatsPipeline.create({writeLogLine: (line) => io.stderr(`${line}\n`), prometheusPort: options.prometheusPort});
        pipeline.attach(client);
        if (pipeline.metricsUrl !== undefined)
            io.stderr(`Prometheus metrics at ${pipeline.metricsUrl}\n`);
        return pipeline;
    }),
    "demo": (args) => demoCommand(args, io)
};

async function main(argv: string[]): Promise<number> {
    const [name, ...args] = argv;
    if (name === undefined || name === "--help" || name === "-h") {
        process.stdout.write(usage);
        return name === undefined ? 2 : 0;
    }
    const command = commands[name];
    if (command === undefined) {
        process.stderr.write(`Unknown command: ${name}\n\n${usage}`);
        return 2;
    }
    return await command(args);
}

main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
}, (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
    process.exitCode = 1;
});
