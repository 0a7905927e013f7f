/** A one-line progress bar redrawn in place on a TTY stream. */
export class ProgressBar {
    private lastDraw = 0;

    constructor(private readonly total: number, private readonly write: (text: string) => void, private readonly label = "requests") {}

    update(done: number, force = false): void {
        const now = Date.now();
        if (!force && now - this.lastDraw < 100 && done < this.total)
            return;
        this.lastDraw = now;
        const width = 30;
        const filled = Math.round((done / this.total) * width);
        this.write(`\r[${"#".repeat(filled)}${" ".repeat(width - filled)}] ${done}/${this.total} ${this.label}`);
    }

    finish(): void {
        this.update(this.total, true);
        this.write("\n");
    }
}
