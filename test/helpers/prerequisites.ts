/**
 * One rule for tests that need something outside the repository (Chromium, code-server, a built
 * llama-server, a built dist/): on a developer's machine a missing prerequisite skips the suite, loudly
 * (the reason goes to stderr and into the test report, counted as skipped); with `CI=true` nothing
 * skips: the suite runs and fails where the prerequisite is used, saying what is missing.
 */
import fs from "node:fs";

export const isCI = process.env.CI === "true";

/** scripts/test.mjs sets it to a file where each skipped suite adds a line; it lists them at the end. */
export const skipLogVariable = "INFERENCE_MONITOR_SKIP_LOG";

/**
 * For `describe(name, {skip: skipReason(name, missing)}, …)`: `false` when nothing is missing or on CI;
 * else the reason to skip, also printed at once so a local run cannot pass quietly without the suite.
 */
export function skipReason(suite: string, missing: readonly string[]): string | false {
    if (missing.length === 0 || isCI)
        return false;
    const reason = `missing ${missing.join("; ")} (with CI=true this fails instead of skipping)`;
    process.stderr.write(`SKIPPED "${suite}": ${reason}\n`);
    const skipLog = process.env[skipLogVariable];
    if (skipLog != null && skipLog !== "")
        fs.appendFileSync(skipLog, `${suite}: ${reason}\n`);
    return reason;
}
