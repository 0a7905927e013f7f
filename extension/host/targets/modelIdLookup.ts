/**
 * A watched server's model name from its `/v1/models`, asked at most once per `retryMs` of a server
 * that lasting-ly has none (a llama.cpp build without the endpoint answers 404 on every poll
 * otherwise). `forget()` after the server was unreachable: once it is back, it is asked at once.
 */
import {readModelAnswer, type TargetGetOptions} from "./targetHttp.js";

/** How long a server without a model list is left alone before it is asked again. */
export const modelIdRetryMs = 60_000;

export class ModelIdLookup {
    private askAfter = Number.NEGATIVE_INFINITY;

    constructor(private readonly now: () => number = Date.now, private readonly retryMs = modelIdRetryMs) {}

    /** The model id, or undefined (without asking while a lasting "none" is remembered). */
    async read(baseUrl: string, http: TargetGetOptions): Promise<string | undefined> {
        if (this.now() < this.askAfter)
            return undefined;
        const {id, lasting} = await readModelAnswer(baseUrl, http);
        if (id === undefined && lasting)
            this.askAfter = this.now() + this.retryMs;
        return id;
    }

    forget(): void {
        this.askAfter = Number.NEGATIVE_INFINITY;
    }
}
