/** Offers text as a file download (the browser dashboard's export; VS Code saves on the host side instead). */
export function downloadText(fileName: string, mimeType: string, content: string): void {
    const url = URL.createObjectURL(new Blob([content], {type: mimeType}));
    const link = document.createElement("a");
    link.href = url;
    link.download = fileName;
    link.hidden = true;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
