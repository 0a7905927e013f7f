/** Where a command writes (the process streams, or a test's buffers). */
export type CliIo = {stdout: (text: string) => void, stderr: (text: string) => void, isTty: boolean};
