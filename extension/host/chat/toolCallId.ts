import {randomBytes} from "node:crypto";

/** A fresh id for a tool call the model made (OpenAI's `call_…` form), shared by the endpoint and VS Code's provider. */
export function newToolCallId(): string {
    return `call_${randomBytes(12).toString("hex")}`;
}
