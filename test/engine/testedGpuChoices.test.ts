/**
 * The GPU self-test's outcome is remembered by the host per `gpu` setting (extension/host/engineClient/
 * testedGpuChoices.ts): the next engine loads that choice without testing again, and a crash makes the
 * host forget it. Real engine processes on the tiny model; a remembered choice carrying a made-up
 * fallback shows which engine used it (on a CPU-only machine a fresh self-test never reports one).
 */
import assert from "node:assert/strict";
import {afterEach, describe, test} from "node:test";
import {EngineClient} from "../../extension/host/engineClient/engineClient.js";
import {forgetGpuChoice, rememberGpuChoice, testedGpuChoice} from "../../extension/host/engineClient/testedGpuChoices.js";
import {chooseEngineGpu} from "../../engine/gpu/gpuSelfTest.js";
import {expectedGpuChoice} from "../helpers/expectedBackend.js";
import {engineInfo} from "../helpers/engineInfoFixture.js";
import {tinyModelPath} from "../helpers/testModels.js";
import {parseEngineOptionsJson, serializeEngineOptions} from "../../protocol/engineOptionsTransfer.js";

const marker = {backend: "cuda" as const, reason: "remembered from an earlier engine of this host"};

describe("the GPU self-test's remembered outcome", () => {
    const clients: EngineClient[] = [];
    afterEach(async () => {
        await Promise.all(clients.splice(0).map((client) => client.stop()));
        forgetGpuChoice("auto");
    });

    async function started(): Promise<EngineClient> {
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 256, parallel: 1, statsIntervalMs: 0});
        clients.push(client);
        await client.start();
        return client;
    }

    test("an engine loads the remembered choice as is, without testing", async () => {
        // Vulkan is not what a test on this machine would choose here unless it really has it: taken as given, untested.
        assert.deepEqual(await chooseEngineGpu("auto", undefined, {backend: "vulkan", fallbacks: [marker]}), {backend: "vulkan", fallbacks: [marker]});
        const {backend} = expectedGpuChoice();
        rememberGpuChoice("auto", engineInfo({backend, gpuFallbacks: [marker]}));
        const client = await started();
        assert.deepEqual(client.info!.gpuFallbacks, [marker], "the engine reports the remembered choice, so it did not test again");
        assert.equal(client.info!.backend, backend);
    });

    test("the first engine's outcome is remembered for the next; a crash forgets it", async () => {
        assert.equal(testedGpuChoice("auto"), undefined);
        const first = await started();
        assert.deepEqual(testedGpuChoice("auto"), {backend: first.info!.backend, fallbacks: first.info!.gpuFallbacks});
        const crashed = new Promise<void>((resolve) => first.observe({onEngineState: (state) => state === "crashed" && resolve()}));
        process.kill(first.info!.pid, "SIGKILL");
        await crashed;
        assert.equal(testedGpuChoice("auto"), undefined, "forgotten after the crash");
    });

    test("the remembered choice crosses to the engine process validated", () => {
        const gpuTested = {backend: "vulkan" as const, fallbacks: [marker]};
        assert.deepEqual(parseEngineOptionsJson(serializeEngineOptions({gpuTested})).gpuTested, gpuTested);
        assert.throws(() => parseEngineOptionsJson(JSON.stringify({gpuTested: {backend: "rocm", fallbacks: []}})), /gpuTested\.backend/);
        assert.throws(() => parseEngineOptionsJson(JSON.stringify({gpuTested: {backend: "cpu", fallbacks: [{backend: "cpu", reason: "x"}]}})),
            /gpuTested\.fallbacks\[\]\.backend/);
    });

    test("a remembered choice is per setting: `off` does not use `auto`'s", async () => {
        rememberGpuChoice("auto", engineInfo({backend: "cpu", gpuFallbacks: [marker]}));
        assert.equal(testedGpuChoice("off"), undefined);
        const client = new EngineClient({modelPath: await tinyModelPath(), threads: 1, contextSize: 256, parallel: 1, statsIntervalMs: 0, gpu: "off"});
        clients.push(client);
        await client.start();
        assert.deepEqual(client.info!.gpuFallbacks, []);
        assert.equal(client.info!.backend, "cpu");
    });
});
