import assert from "node:assert/strict";
import {test} from "node:test";
import {ApiKeyCheck, parseApiKey} from "../../extension/host/openai/apiKeys.js";
import {clientLabel} from "../../extension/host/openai/clientLabel.js";

test("client labels from User-Agent, X-Title and API key names", () => {
    assert.equal(clientLabel({userAgent: "OpenAI/JS 6.30.1"}), "openai-js");
    assert.equal(clientLabel({userAgent: "OpenAI/Python 1.51.0"}), "openai-python");
    assert.equal(clientLabel({userAgent: "curl/8.5.0"}), "curl");
    // As Claude Code 2.1.197, Codex CLI 0.171.0 and the Anthropic SDK send them (captured).
    assert.equal(clientLabel({userAgent: "claude-cli/2.1.197 (external, sdk-cli)"}), "Claude Code");
    assert.equal(clientLabel({userAgent: "codex_exec/0.171.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.171.0)"}), "Codex");
    assert.equal(clientLabel({userAgent: "Anthropic/JS 1.17.0"}), "anthropic-js");
    assert.equal(clientLabel({userAgent: "python-requests/2.32.3"}), "python-requests");
    assert.equal(clientLabel({userAgent: "Mozilla/5.0 (X11; Linux x86_64)"}), "browser");
    assert.equal(clientLabel({userAgent: "MyTool/0.3 (+https://example.com)"}), "MyTool");
    assert.equal(clientLabel({userAgent: "OpenAI/JS 4.0.0", title: "Roo Code"}), "Roo Code");
    assert.equal(clientLabel({userAgent: "OpenAI/JS 4.0.0", title: "Cline"}, "team-key"), "team-key");
    assert.equal(clientLabel({}), "unknown");
    assert.equal(clientLabel({userAgent: "x".repeat(500)}).length, 64);
});

test("API keys: NAME=KEY or KEY; checked as Bearer tokens", () => {
    assert.deepEqual(parseApiKey("continue=sk-1=2"), {name: "continue", key: "sk-1=2"});
    assert.deepEqual(parseApiKey("sk-plain"), {key: "sk-plain"});
    const check = new ApiKeyCheck([{key: "sk-a", name: "a"}, {key: "sk-b"}]);
    assert.ok(check.required);
    assert.deepEqual(check.check("Bearer sk-a"), {name: "a"});
    assert.deepEqual(check.check("bearer sk-b"), {name: undefined});
    assert.equal(check.check("Bearer sk-c"), undefined);
    assert.equal(check.check("sk-a"), undefined);
    assert.equal(check.check(undefined), undefined);
    assert.equal(new ApiKeyCheck([]).required, false);
});
