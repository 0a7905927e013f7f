/**
 * Chart colours from the VS Code theme (`--vscode-charts-*`, `--vscode-foreground`, …) through the
 * `--im-*` variables of panel.css, which add fallbacks for a plain browser. Re-read when VS Code
 * switches theme (the body class: vscode-light / vscode-dark / vscode-high-contrast[-light]) or the
 * browser's colour scheme changes.
 */
export const seriesColorNames = ["blue", "red", "green", "yellow", "orange", "purple"] as const;
export type SeriesColorName = typeof seriesColorNames[number];

export type ThemeKind = "light" | "dark" | "highContrast" | "highContrastLight";

export type Theme = {
    kind: ThemeKind,
    foreground: string,
    muted: string,
    background: string,
    border: string,
    grid: string,
    colors: Record<SeriesColorName, string>,
    /** Line width for series; thicker in high contrast. */
    lineWidth: number,
    fontFamily: string
};

function variable(style: CSSStyleDeclaration, name: string, fallback: string): string {
    const value = style.getPropertyValue(name).trim();
    return value === "" ? fallback : value;
}

function themeKind(): ThemeKind {
    const classes = document.body.classList;
    if (classes.contains("vscode-high-contrast-light")) return "highContrastLight";
    if (classes.contains("vscode-high-contrast")) return "highContrast";
    if (classes.contains("vscode-light")) return "light";
    if (classes.contains("vscode-dark")) return "dark";
    return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function readTheme(): Theme {
    const style = getComputedStyle(document.body);
    const kind = themeKind();
    const highContrast = kind === "highContrast" || kind === "highContrastLight";
    const colors = {} as Record<SeriesColorName, string>;
    for (const name of seriesColorNames)
        colors[name] = variable(style, `--im-${name}`, "#888888");
    const foreground = variable(style, "--im-fg", "#cccccc");
    return {
        kind,
        foreground,
        muted: variable(style, "--im-muted", foreground),
        background: variable(style, "--im-bg", "#1e1e1e"),
        border: variable(style, "--im-border", "#80808059"),
        grid: highContrast ? variable(style, "--im-border", foreground) : withAlpha(foreground, 0.12),
        colors,
        lineWidth: highContrast ? 2.5 : 1.5,
        fontFamily: variable(style, "--im-font", "system-ui, sans-serif")
    };
}

/** Calls `onChange` with the new theme whenever it may have changed; returns the stop function. */
export function watchTheme(onChange: (theme: Theme) => void): () => void {
    const notify = (): void => onChange(readTheme());
    const observer = new MutationObserver(notify);
    observer.observe(document.body, {attributes: true, attributeFilter: ["class"]});
    const media = window.matchMedia("(prefers-color-scheme: dark)");
    media.addEventListener("change", notify);
    return () => {
        observer.disconnect();
        media.removeEventListener("change", notify);
    };
}

let probe: CanvasRenderingContext2D | null | undefined;

/** Any CSS colour with the given alpha, as rgba(). */
export function withAlpha(color: string, alpha: number): string {
    probe ??= document.createElement("canvas").getContext("2d");
    if (probe === null)
        return color;
    probe.fillStyle = "#000000";
    probe.fillStyle = color;
    const normalised = String(probe.fillStyle);
    const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(normalised);
    if (hex !== null)
        return `rgba(${parseInt(hex[1]!, 16)}, ${parseInt(hex[2]!, 16)}, ${parseInt(hex[3]!, 16)}, ${alpha})`;
    const rgba = /^rgba?\(([^,]+),([^,]+),([^,)]+)/.exec(normalised);
    if (rgba !== null)
        return `rgba(${rgba[1]!.trim()}, ${rgba[2]!.trim()}, ${rgba[3]!.trim()}, ${alpha})`;
    return color;
}
