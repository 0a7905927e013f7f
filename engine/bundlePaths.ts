import fs from "node:fs";
import path from "node:path";

/** Entry files esbuild writes next to each other in `dist/`. */
export type BundledEntry = "engineMain.js" | "statsWorker.js" | "gpuProbe.js" | "cli.js";

/**
 * Path of a bundled entry. Bundles sit side by side in `dist/`; when running from sources (tests
 * under tsx) this file is in `engine/`, so the built bundles are in `../dist/`.
 */
export function bundledEntryPath(entry: BundledEntry): string {
    const candidates = [path.join(__dirname, entry), path.join(__dirname, "..", "dist", entry)];
    for (const candidate of candidates)
        if (fs.existsSync(candidate))
            return candidate;
    throw new Error(`Cannot find ${entry} (looked in ${candidates.join(", ")}); run "npm run build" first`);
}
