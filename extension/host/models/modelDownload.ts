import {importNodeLlamaCpp} from "../../../engine/llamaTypes.js";

export type DownloadProgress = {downloadedBytes: number, totalBytes: number};

/** `hf:user/repo:quant`, `hf:user/repo/file.gguf`, or an http(s) URL to a .gguf file. */
export function isDownloadableModelUri(uri: string): boolean {
    return /^hf:[\w.-]+\/[\w.-]+([:/].+)?$/.test(uri) || /^https?:\/\/\S+$/.test(uri);
}

/**
 * Downloads a model with node-llama-cpp's downloader (resumable, split-file aware) into `dirPath`
 * and returns the file to load. Cancellable through `signal`.
 */
export async function downloadModel(uri: string, dirPath: string, options: {
    signal?: AbortSignal,
    onProgress?: (progress: DownloadProgress) => void
} = {}): Promise<string> {
    if (!isDownloadableModelUri(uri))
        throw new Error(`Not a model URI: ${uri} (expected hf:user/repo:quant or an https:// URL)`);
    const {createModelDownloader} = await importNodeLlamaCpp();
    const downloader = await createModelDownloader({
        modelUri: uri,
        dirPath,
        showCliProgress: false,
        deleteTempFileOnCancel: false,
        ...(options.onProgress !== undefined ? {
            onProgress: ({totalSize, downloadedSize}: {totalSize: number, downloadedSize: number}) =>
                options.onProgress?.({downloadedBytes: downloadedSize, totalBytes: totalSize})
        } : {})
    });
    return await downloader.download(options.signal !== undefined ? {signal: options.signal} : {});
}
