import os from "node:os";
import path from "node:path";
import {ensureDemoModel} from "../../engine/model/demoModel.js";

/** Cache shared by every test run on this machine; generated models are deterministic, so sharing is safe. */
export const testCacheDir = process.env.INFERENCE_MONITOR_TEST_CACHE ?? path.join(os.tmpdir(), "inference-monitor-test-cache");

/** The generated tiny (~1 M params) model: fast enough for lifecycle tests on 2 CPU cores. */
export async function tinyModelPath(): Promise<string> {
    return await ensureDemoModel({size: "tiny", seed: 0, cacheDir: testCacheDir});
}
