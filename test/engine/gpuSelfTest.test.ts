/**
 * The GPU self-test (engine/gpu/gpuSelfTest.ts): the real probe process on the real tiny model (on the
 * CPU backend, which every machine has), probe processes that crash, hang or answer garbage, and the
 * choice of backend from the probes' outcomes. On a GPU machine, `npm run test:gpu` runs it for real.
 */
import assert from "node:assert/strict";
import path from "node:path";
import {describe, test} from "node:test";
import {chooseGpuBackend, probeBackend, tellingLine, type GpuOnlyBackend, type ProbeOutcome} from "../../engine/gpu/gpuSelfTest.js";
import {ensureDemoModel} from "../../engine/model/demoModel.js";

const fixture = (name: string) => path.join(__dirname, "..", "fixtures", "gpuProbe", name);

describe("GPU self-test: the probe process", () => {
    test("the real probe runs the tiny demo model and answers ok (CPU backend)", async () => {
        const outcome = await probeBackend("cpu", await ensureDemoModel({size: "tiny"}));
        assert.deepEqual(outcome, {ok: true, devices: []});
    });

    test("the real probe on a missing model: not ok, with node-llama-cpp's reason", async () => {
        const outcome = await probeBackend("cpu", "/nonexistent/model.gguf");
        assert.equal(outcome.ok, false);
        assert.match((outcome as {reason: string}).reason, /nonexistent\/model\.gguf/);
    });

    test("a probe that aborts: not ok, quoting ggml's error line and the signal", async () => {
        const outcome = await probeBackend("cuda", "unused.gguf", fixture("abortsLikeGgml.cjs"));
        assert.deepEqual(outcome, {ok: false,
            reason: "CUDA error: the provided PTX was compiled with an unsupported toolchain. (the self-test process ended with signal SIGABRT)"});
    });

    test("a probe that never answers: killed at the timeout, not ok", async () => {
        const started = performance.now();
        const outcome = await probeBackend("vulkan", "unused.gguf", fixture("hangs.cjs"), 500);
        assert.deepEqual(outcome, {ok: false, reason: "the self-test did not finish within 0.5 s"});
        assert.ok(performance.now() - started < 5000);
    });

    test("a probe whose answer is malformed: not ok, naming the bad field", async () => {
        const outcome = await probeBackend("cuda", "unused.gguf", fixture("sendsGarbage.cjs"));
        assert.equal(outcome.ok, false);
        assert.match((outcome as {reason: string}).reason, /^the self-test sent a bad message: GPU probe result\.devices/);
    });
});

describe("GPU self-test: choosing the backend", () => {
    /** A probe answering from a table, recording what it was asked. */
    function tableProbe(outcomes: Partial<Record<GpuOnlyBackend, ProbeOutcome>>) {
        const asked: GpuOnlyBackend[] = [];
        return {asked, probe: (backend: GpuOnlyBackend): Promise<ProbeOutcome> => {
            asked.push(backend);
            return Promise.resolve(outcomes[backend] ?? {ok: false as const, reason: "not in the table"});
        }};
    }
    const crash: ProbeOutcome = {ok: false, reason: "CUDA error: the provided PTX was compiled with an unsupported toolchain."};

    test("auto: a failing backend is skipped with its reason and the next one that passes is used", async () => {
        const {asked, probe} = tableProbe({cuda: crash, vulkan: {ok: true, devices: ["NVIDIA H200"]}});
        assert.deepEqual(await chooseGpuBackend("auto", ["cuda", "vulkan"], probe),
            {backend: "vulkan", fallbacks: [{backend: "cuda", reason: crash.reason}]});
        assert.deepEqual(asked, ["cuda", "vulkan"]);
    });

    test("auto: the first backend that passes is used without testing the rest", async () => {
        const {asked, probe} = tableProbe({cuda: {ok: true, devices: ["NVIDIA H200"]}});
        assert.deepEqual(await chooseGpuBackend("auto", ["cuda", "vulkan"], probe), {backend: "cuda", fallbacks: []});
        assert.deepEqual(asked, ["cuda"]);
    });

    test("auto: when every GPU backend fails, the CPU, with every reason", async () => {
        const {probe} = tableProbe({cuda: crash, vulkan: {ok: false, reason: "vk::Device::createComputePipeline: ErrorOutOfDeviceMemory"}});
        const choice = await chooseGpuBackend("auto", ["cuda", "vulkan"], probe);
        assert.equal(choice.backend, "cpu");
        assert.deepEqual(choice.fallbacks.map((f) => f.backend), ["cuda", "vulkan"]);
    });

    test("auto with no GPU backend on the machine, and off: the CPU, nothing probed", async () => {
        for (const [setting, supported] of [["auto", []], ["off", ["cuda", "vulkan"]]] as const) {
            const {asked, probe} = tableProbe({});
            assert.deepEqual(await chooseGpuBackend(setting, supported, probe), {backend: "cpu", fallbacks: []});
            assert.deepEqual(asked, []);
        }
    });

    test("a backend asked for by name that fails its self-test: an error with the reason, no fall back", async () => {
        const {probe} = tableProbe({cuda: crash, vulkan: {ok: true, devices: []}});
        await assert.rejects(chooseGpuBackend("cuda", ["cuda", "vulkan"], probe),
            /^Error: CUDA failed the engine's GPU self-test: CUDA error: the provided PTX was compiled with an unsupported toolchain\.\. GPU setting "auto"/);
    });

    test("a backend asked for by name that this machine lacks: an error naming it, nothing probed", async () => {
        const {asked, probe} = tableProbe({});
        await assert.rejects(chooseGpuBackend("metal", ["cuda", "vulkan"], probe), /^Error: no Metal backend works here: /);
        assert.deepEqual(asked, []);
    });
});

describe("GPU self-test: the reason read from a crashed probe's stderr", () => {
    test("ggml's error text wins over its abort line; build paths are cut to the file name", () => {
        assert.equal(tellingLine([
            "ggml_cuda_init: found 1 CUDA devices:",
            "/home/runner/work/node-llama-cpp/node-llama-cpp/llama/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:108: CUDA error",
            "CUDA error: the provided PTX was compiled with an unsupported toolchain.",
            "/work/main/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-base.so(ggml_abort+0x152)[0x7f22c8147f42]"
        ].join("\n")), "CUDA error: the provided PTX was compiled with an unsupported toolchain.");
    });

    test("only the abort line (the error text was lost): that line, without the build machine's path", () => {
        assert.equal(tellingLine("/home/runner/work/node-llama-cpp/llama/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:108: CUDA error\n"),
            "ggml-cuda.cu:108: CUDA error");
    });

    test("an assertion, a Vulkan error, or nothing telling at all", () => {
        assert.equal(tellingLine("llama_context: constructing\n/src/ggml/ggml-vulkan.cpp:42: GGML_ASSERT(buf != nullptr) failed\nbacktrace"),
            "ggml-vulkan.cpp:42: GGML_ASSERT(buf != nullptr) failed");
        assert.equal(tellingLine("ggml_vulkan: Device memory allocation of size 1024 failed.\n"), "ggml_vulkan: Device memory allocation of size 1024 failed.");
        assert.equal(tellingLine("loading\nstill loading\n"), "still loading");
        assert.equal(tellingLine(""), undefined);
    });
});
