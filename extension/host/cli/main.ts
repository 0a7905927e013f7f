/** `inference-monitor` command line: dispatches to one command per file. */
import {makeModelCommand} from "./makeModelCommand.js";

const usage = `Usage: inference-monitor <command> [options]

Commands:
  make-model --out FILE [--size tiny|small|medium] [--seed N] [--dtype f16|f32]
                 write the built-in demo model (a GGUF with seeded random weights)
`;

type Command = (args: string[]) => Promise<number>;

const commands: Record<string, Command> = {
    "make-model": (args) => makeModelCommand(args)
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
