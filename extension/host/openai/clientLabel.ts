import {maxClientLabelLength} from "../../../protocol/requestLifecycle.js";

/** Well-known clients, by what their `User-Agent` contains (first match wins). */
const knownAgents: ReadonlyArray<[RegExp, string]> = [
    [/^OpenAI\/JS\b/i, "openai-js"],
    [/^OpenAI\/Python\b/i, "openai-python"],
    [/^AsyncOpenAI\/Python\b/i, "openai-python"],
    [/^Anthropic\/JS\b/i, "anthropic-js"],
    [/^(Async)?Anthropic\/Python\b/i, "anthropic-python"],
    [/^claude-cli\//i, "Claude Code"],
    [/^codex_/i, "Codex"],
    [/^ollama-js\//i, "ollama-js"],
    [/^ollama-python\//i, "ollama-python"],
    [/\bContinue\b/i, "Continue"],
    [/\bCline\b/i, "Cline"],
    [/\bRoo-?Code\b/i, "Roo Code"],
    [/\bGitHubCopilotChat\b|\bCopilot\b/i, "Copilot"],
    [/^curl\//i, "curl"],
    [/^Wget\//i, "wget"],
    [/^python-requests\//i, "python-requests"],
    [/^python-httpx\//i, "httpx"],
    [/^aiohttp\b|Python\/[\d.]+ aiohttp/i, "aiohttp"],
    [/^Go-http-client\//i, "go"],
    [/^Mozilla\//i, "browser"],
    [/^node(-fetch)?\b|^undici\b/i, "node"]
];

/**
 * The client label of an API request: the name of the API key it used when keys are named, else the
 * app's `X-Title` (what Cline, Roo Code and OpenRouter-style clients send), else a well-known
 * `User-Agent` (`openai-js`, `curl`, …), else the User-Agent's first product name, else `unknown`.
 */
export function clientLabel(headers: {userAgent?: string | undefined, title?: string | undefined}, apiKeyName?: string): string {
    const label = apiKeyName ?? cleanTitle(headers.title) ?? fromUserAgent(headers.userAgent) ?? "unknown";
    return label.slice(0, maxClientLabelLength);
}

function cleanTitle(title: string | undefined): string | undefined {
    const clean = title?.replace(/[^\x20-\x7e]/g, "").trim();
    return clean === undefined || clean === "" ? undefined : clean;
}

function fromUserAgent(userAgent: string | undefined): string | undefined {
    if (userAgent === undefined || userAgent.trim() === "")
        return undefined;
    for (const [pattern, label] of knownAgents)
        if (pattern.test(userAgent))
            return label;
    const product = /^[A-Za-z0-9._-]+/.exec(userAgent.trim());
    return product?.[0];
}
