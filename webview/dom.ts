/** Tiny DOM helpers (no innerHTML anywhere: every text goes through textContent). */

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
    const element = document.createElement(tag);
    if (className !== undefined)
        element.className = className;
    if (text !== undefined)
        element.textContent = text;
    return element;
}

/** Sets text only when it changed (avoids needless layout work at 4 Hz). */
export function setText(element: HTMLElement, text: string): void {
    if (element.textContent !== text)
        element.textContent = text;
}
