/**
 * Our OpenAI endpoint on a real engine (the tiny model unless told otherwise), with the official `openai`
 * client pointed at it: for API tests that need no stats pipeline or dashboard.
 */
import {after, before} from "node:test";
import OpenAI from "openai";
import {EngineClient, type EngineClientOptions} from "../../extension/host/engineClient/engineClient.js";
import {ApiServer, type ApiServerOptions} from "../../extension/host/openai/apiServer.js";
import {tinyModelPath} from "./testModels.js";

export type ApiUnderTest = {client: EngineClient, server: ApiServer, openai: OpenAI, stop(): Promise<void>};

/** Server options a test may set. */
export type TestServerOptions = Pick<ApiServerOptions, "slotSavePath">;

/** One thread, 2 sequences of 1024 tokens, no stats, plus `options`; the server on a free port, plus `serverOptions`. */
export async function startApiUnderTest(options: EngineClientOptions = {}, serverOptions: TestServerOptions = {}): Promise<ApiUnderTest> {
    const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 1024, parallel: 2, statsIntervalMs: 0, ...options});
    await client.start();
    const server = await ApiServer.listen({engine: {current: () => client}, port: 0, ...serverOptions});
    return {client, server, openai: new OpenAI({baseURL: server.baseUrl, apiKey: "not-needed", maxRetries: 0}), stop: async () => {
        await server.close();
        await client.stop();
    }};
}

/**
 * Starts the API before the enclosing suite's tests and stops it after them (node:test hooks); `client` and
 * `openai` are there from the first test on. `options` may be computed then (a model file to prepare).
 */
type SuiteApi = {readonly client: EngineClient, readonly openai: OpenAI};

export function apiForSuite(options: EngineClientOptions | (() => Promise<EngineClientOptions>) = {},
                            serverOptions: TestServerOptions = {}): SuiteApi {
    let api: ApiUnderTest | undefined;
    before(async () => {
        api = await startApiUnderTest(typeof options === "function" ? await options() : options, serverOptions);
    });
    after(async () => {
        await api?.stop();
    });
    const started = (): ApiUnderTest => {
        if (api === undefined)
            throw new Error("the API under test is not running (used outside the suite's tests?)");
        return api;
    };
    return {get client() {
        return started().client;
    }, get openai() {
        return started().openai;
    }};
}
