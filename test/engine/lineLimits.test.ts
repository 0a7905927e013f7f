/** Code completion's line limits (llama.cpp's `n_indent`, `t_max_predict_ms`) on text as it streams in pieces. */
import assert from "node:assert/strict";
import {test} from "node:test";
import {LineLimits} from "../../engine/lineLimits.js";

test("n_indent: the first line is free; a later line short of the indentation ends the text at its first character", () => {
    const limits = new LineLimits(4, 0);
    const pieces = ["x = 1", "\n    y", " = 2\n", "  ", "\t", "z = 3\n", "never"];
    const out = pieces.map((piece) => limits.push(piece));
    assert.deepEqual(out, ["x = 1", "\n    y", " = 2\n", "  ", "\t", "", ""]);
    assert.equal(limits.stopped, true);
});

test("n_indent: a blank line counts as a line short of the indentation; tabs and spaces count alike; 0 is off", () => {
    const blank = new LineLimits(1, 0);
    assert.equal(blank.push("a\n\nb"), "a\n");
    assert.equal(blank.stopped, true);
    const tabs = new LineLimits(2, 0);
    assert.equal(tabs.push("a\n\t b\n \tc\nd"), "a\n\t b\n \tc\n");
    const off = new LineLimits(0, 0);
    assert.equal(off.push("a\n\nb\nc"), "a\n\nb\nc");
    assert.equal(off.stopped, false);
});

test("t_max_predict_ms: only a token with a newline, after the time, ends generation", () => {
    const limits = new LineLimits(0, 100);
    // Times since the first token (its call starts the clock at 1000).
    assert.equal(limits.timeUp("first", 1000), false);
    assert.equal(limits.timeUp("text", 1500), false, "no newline");
    assert.equal(limits.timeUp("a\nb", 1050), false, "in time");
    assert.equal(limits.timeUp("a\nb", 1101), true);
    assert.equal(limits.push("more"), "", "nothing after");
});
