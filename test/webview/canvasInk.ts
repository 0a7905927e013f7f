/** What a panel chart has drawn, read back from its canvas in the page (the panel tests and the watch/proxy ones). */
import type {Page} from "playwright-core";

/** Pixels of a canvas that are drawn (alpha > 0), and those close to a CSS colour. */
export async function canvasInk(page: Page, chart: string, cssColor?: string): Promise<{drawn: number, total: number, colored: number}> {
    return await page.evaluate(([name, color]) => {
        const canvas = document.querySelector<HTMLCanvasElement>(`canvas[data-chart="${name}"]`);
        if (canvas === null)
            throw new Error(`no canvas for ${name}`);
        // read a copy: repeated readbacks of the chart's own canvas make Chromium warn on the console
        const copy = document.createElement("canvas");
        copy.width = canvas.width;
        copy.height = canvas.height;
        const context = copy.getContext("2d", {willReadFrequently: true})!;
        context.drawImage(canvas, 0, 0);
        const {data} = context.getImageData(0, 0, copy.width, copy.height);
        let target: number[] | undefined;
        if (color !== undefined) {
            const probe = document.createElement("canvas").getContext("2d")!;
            probe.fillStyle = getComputedStyle(document.body).getPropertyValue(color).trim();
            const hex = String(probe.fillStyle);
            target = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
        }
        let drawn = 0;
        let colored = 0;
        for (let i = 0; i < data.length; i += 4) {
            if (data[i + 3]! === 0)
                continue;
            drawn++;
            if (target !== undefined && data[i + 3]! > 200 && Math.abs(data[i]! - target[0]!) + Math.abs(data[i + 1]! - target[1]!) + Math.abs(data[i + 2]! - target[2]!) < 60)
                colored++;
        }
        return {drawn, total: data.length / 4, colored};
    }, [chart, cssColor] as const);
}
