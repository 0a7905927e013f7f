import fs from "node:fs";
import path from "node:path";

/** `given` as an absolute path when it names an existing directory (following links); undefined otherwise. */
export function existingDirectory(given: string): string | undefined {
    const directory = path.resolve(given);
    return fs.statSync(directory, {throwIfNoEntry: false})?.isDirectory() === true ? directory : undefined;
}
