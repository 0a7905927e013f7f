/**
 * Engine process entry. Started by the host's EngineClient with child_process.fork (Node IPC for
 * requests and outputs); the stats channel URL and secret arrive through the environment.
 */
import {Engine} from "./engine.js";
import {engineOptionsEnv, parseEngineOptionsJson} from "../protocol/engineOptionsTransfer.js";
import {hostToEngineFrameMessages, parseHostToEngine, type EngineToHost, type HostToEngine} from "../protocol/engineMessages.js";
import {statsSecretEnv, statsUrlEnv} from "../protocol/statsChannel.js";
import {errorMessage} from "../common/errorMessage.js";

function send(message: EngineToHost): void {
    if (process.connected)
        process.send?.(message);
}

async function main(): Promise<void> {
    if (process.send === undefined) {
        process.stderr.write("engine/main must be started by EngineClient (it talks over Node IPC)\n");
        process.exit(2);
    }
    const options = parseEngineOptionsJson(process.env[engineOptionsEnv] ?? "{}");
    const url = process.env[statsUrlEnv];
    const secret = process.env[statsSecretEnv];
    delete process.env[statsSecretEnv];
    if (url !== undefined && secret !== undefined)
        options.statsChannel = {url, secret};

    // Requests may arrive while the model loads; keep them until the engine is ready.
    const early: HostToEngine[] = [];
    let engine: Engine | undefined;
    // A batch frame's messages are handled in one go (see HostToEngineFrame), each validated on its own.
    process.on("message", (frame: unknown) => {
        let messages: unknown[];
        try {
            messages = hostToEngineFrameMessages(frame);
        } catch (error) {
            send({type: "rejected", reason: errorMessage(error)});
            return;
        }
        for (const raw of messages) {
            let message: HostToEngine;
            try {
                message = parseHostToEngine(raw);
            } catch (error) {
                send({type: "rejected", reason: errorMessage(error)});
                continue;
            }
            if (message.type === "shutdown")
                void shutdown(engine);
            else if (engine === undefined)
                early.push(message);
            else
                engine.handle(message);
        }
    });
    process.on("disconnect", () => void shutdown(engine));

    engine = await Engine.start(options, send);
    if (engine === undefined) {
        // loadFailed was sent; give IPC a moment to flush, then exit with a failure code.
        setTimeout(() => process.exit(1), 50);
        return;
    }
    for (const message of early.splice(0))
        engine.handle(message);
}

async function shutdown(engine: Engine | undefined): Promise<void> {
    try {
        await engine?.dispose();
    } finally {
        process.exit(0);
    }
}

main().catch((error: unknown) => {
    send({type: "log", level: "error", message: `engine failed: ${errorMessage(error)}`});
    setTimeout(() => process.exit(1), 50);
});
