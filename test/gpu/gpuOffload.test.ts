/**
 * `npm run test:gpu`: proves the engine offloads to a GPU where node-llama-cpp finds one (CUDA, Vulkan
 * or Metal, prebuilt binaries): runs `inference-monitor demo` as a user would and checks that the
 * dashboard's header names the GPU backend, the VRAM gauge on /metrics is above zero and is read again
 * under load, and the periodic log line says "GPU KV cache usage" (vLLM's wording, "KV cache usage" on
 * the CPU); and that `bench` runs on that backend by default and on the CPU with `--gpu off`, printing both
 * speeds; that every GPU backend node-llama-cpp offers here either serves or is refused at start with
 * the self-test's reason (engine/gpu/gpuSelfTest.ts), never crashing on a request. Not part of `npm test`: on a machine without a GPU it skips, loudly. Only the header check needs
 * Chromium: on a GPU machine without one, that check alone skips (also loudly).
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";
import type {ChildProcess} from "node:child_process";
import {backendHeaderNames, expectedGpuChoice} from "../helpers/expectedBackend.js";
import {skipReason} from "../helpers/prerequisites.js";
import {runCli, type CliRun} from "../helpers/runCli.js";
import {freeLoopbackPort} from "../../scripts/llamaServer.js";
import {chromiumSkipReason, launchChromium, type LaunchedBrowser} from "../webview/chromium.js";

const {backend, fallbacks} = expectedGpuChoice();
const suite = "GPU offload (npm run test:gpu)";
const skip = skipReason(suite, backend === "cpu" ? ["a GPU: node-llama-cpp's prebuilt binaries found no CUDA, Vulkan or Metal device here"] : []);
const headerSkip = skip === false ? chromiumSkipReason(`${suite}: the dashboard header`) : skip;

/** vllm:vram_used_bytes from the Prometheus text. */
function vramUsed(metrics: string): number {
    const line = metrics.split("\n").find((l) => l.startsWith("vllm:vram_used_bytes"));
    assert.ok(line !== undefined, "no vllm:vram_used_bytes on /metrics");
    return Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe(suite, {skip, timeout: 5 * 60_000}, () => {
    let run: Promise<CliRun>;
    let child: ChildProcess | undefined;
    let dashboardUrl = "";
    let browser: LaunchedBrowser | undefined;
    let metricsPort = 0;
    const vramSamples: number[] = [];

    before(async () => {
        metricsPort = await freeLoopbackPort();
        let ready: () => void = () => undefined;
        const engineReady = new Promise<void>((resolve) => ready = resolve);
        run = runCli(["demo", "--duration", "40", "--rate", "6", "--log-interval", "2", "--prometheus-port", String(metricsPort)], {
            timeoutMs: 4 * 60_000,
            onStdout: (text, process) => {
                child = process;
                dashboardUrl = /Dashboard: (\S+)/.exec(text)?.[1] ?? "";
                if (text.includes("Engine ready:"))
                    ready();
            }
        });
        await Promise.race([engineReady, run.then((result) => assert.fail(`demo exited early: ${result.stderr}`))]);
        if (headerSkip === false)
            browser = await launchChromium();
    });
    after(async () => {
        await browser?.close();
        child?.kill("SIGINT");
        await run;
    });

    test(`the header names the ${backendHeaderNames[backend]} backend and a GPU`, {skip: headerSkip}, async () => {
        assert.ok(browser !== undefined);
        const page = await browser.context.newPage();
        await page.goto(dashboardUrl);
        await page.waitForFunction(() => document.querySelector("[data-field='backend']")?.textContent !== "–", undefined, {timeout: 30_000});
        const header = await page.$$eval("[data-field]", (elements) => Object.fromEntries(elements.map((e) => [(e as HTMLElement).dataset.field!, e.textContent])));
        assert.equal(header.backend, backendHeaderNames[backend]);
        assert.notEqual(header.gpu, "none");
        assert.match(header.vram!, /\d/);
    });

    test("the VRAM gauge is above zero and keeps being read under load", async () => {
        const deadline = Date.now() + 15_000;
        while (Date.now() < deadline) {
            const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
            vramSamples.push(vramUsed(await response.text()));
            await new Promise((resolve) => setTimeout(resolve, 500));
        }
        assert.ok(vramSamples.every((bytes) => bytes > 0), `VRAM used samples: ${vramSamples.join(", ")}`);
        // The engine re-reads VRAM every few seconds; over 15 s of load the gauge changes at least once.
        assert.ok(new Set(vramSamples).size > 1, `VRAM used never moved under load: ${vramSamples.join(", ")}`);
    });

    test("the periodic log line speaks of the GPU KV cache", async () => {
        child?.kill("SIGINT");
        const result = await run;
        assert.match(result.stdout, /GPU KV cache usage: \d+\.\d%/);
        assert.match(result.stdout, new RegExp(`Engine ready: .*, ${backend.toUpperCase()},`));
    });
});

describe(`${suite}: bench`, {skip, timeout: 5 * 60_000}, () => {
    /** One `bench` run on the small demo model at concurrency 4; its JSON. */
    async function bench(gpuFlag: string[]): Promise<{result: Record<string, unknown>, stdout: string, stderr: string}> {
        const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "im-gpu-bench-")), "result.json");
        const run = await runCli(["bench", "--num-prompts", "48", "--input-len", "64", "--output-len", "64", "--max-concurrency", "4",
            "--no-progress", "--json", json, ...gpuFlag], {timeoutMs: 4 * 60_000});
        assert.equal(run.code, 0, run.stderr);
        return {result: JSON.parse(fs.readFileSync(json, "utf8")) as Record<string, unknown>, stdout: run.stdout, stderr: run.stderr};
    }

    test(`runs on ${backendHeaderNames[backend]} by default and on the CPU with --gpu off`, async (t) => {
        const gpu = await bench([]);
        assert.equal(gpu.result.backend, backend);
        assert.match(gpu.stdout, new RegExp(`^Engine: ${backend.toUpperCase()} \\(.+\\) · `, "m"));
        // A backend that failed the self-test is named on stderr, with its reason.
        for (const fallback of fallbacks)
            assert.match(gpu.stderr, new RegExp(`^Warning: ${backendHeaderNames[fallback.backend]} failed the engine's GPU self-test \\(.+\\); running on ${backendHeaderNames[backend]} instead`, "m"));
        for (const fallback of fallbacks)
            t.diagnostic(`skipped ${fallback.backend}: ${fallback.reason}`);
        const cpu = await bench(["--gpu", "off"]);
        assert.equal(cpu.result.backend, "cpu");
        assert.match(cpu.stdout, /^Engine: CPU · /m);
        for (const [name, run] of [[backend, gpu], ["cpu", cpu]] as const)
            t.diagnostic(`${name}: ${Number(run.result.output_throughput).toFixed(1)} output tok/s, median TTFT ${Number(run.result.median_ttft_ms).toFixed(1)} ms, ` +
                `median ITL ${Number(run.result.median_itl_ms).toFixed(2)} ms, threads ${String(run.result.threads)}`);
        assert.equal(gpu.result.completed, 48);
        assert.equal(cpu.result.completed, 48);
    });
});

describe(`${suite}: every GPU backend here serves or is refused at start`, {skip, timeout: 10 * 60_000}, () => {
    test("--gpu cuda|vulkan|metal: all requests complete, or the engine does not start and says why (no crash mid-run)", async (t) => {
        const {getLlamaGpuTypes} = await import("node-llama-cpp");
        const offered = (await getLlamaGpuTypes("supported")).filter((type) => type !== false);
        assert.ok(offered.length > 0);
        for (const gpu of offered) {
            const run = await runCli(["bench", "--num-prompts", "8", "--output-len", "16", "--max-concurrency", "4", "--no-progress", "--gpu", gpu],
                {timeoutMs: 4 * 60_000});
            const name = backendHeaderNames[gpu];
            if (run.code === 0) {
                assert.match(run.stdout, new RegExp(`^Engine: ${gpu.toUpperCase()} \\(.+\\) · `, "m"));
                assert.match(run.stdout, /Successful requests:\s+8\n/);
                assert.ok(!fallbacks.some((f) => f.backend === gpu), `${name} served here, but auto skipped it`);
                t.diagnostic(`${name}: serves`);
            } else {
                assert.equal(run.code, 1, run.stderr);
                assert.match(run.stderr, new RegExp(`Could not start the engine: (${name} failed the engine's GPU self-test: .+|no ${name} backend works here)`));
                assert.ok(fallbacks.some((f) => f.backend === gpu) || backend !== gpu, `${name} refused here, but auto used it`);
                t.diagnostic(`${name}: refused at start: ${run.stderr.trim().split("\n").at(-1)}`);
            }
        }
    });
});
