import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {StopStringMatcher} from "../../engine/stopStringMatcher.js";

/** Feeds pieces one by one; returns everything output and whether it stopped. */
function run(stops: string[], pieces: string[]): {text: string, stopped: boolean, outputs: string[]} {
    const matcher = new StopStringMatcher(stops);
    const outputs = pieces.map((piece) => matcher.push(piece));
    outputs.push(matcher.flush());
    return {text: outputs.join(""), stopped: matcher.hasStopped, outputs};
}

describe("StopStringMatcher", () => {
    test("no stop strings: text passes through unchanged, piece by piece", () => {
        assert.deepEqual(run([], ["ab", "c"]).outputs, ["ab", "c", ""]);
    });

    test("a stop string inside one piece cuts the output before it", () => {
        assert.deepEqual(run(["END"], ["hello END world"]), {text: "hello ", stopped: true, outputs: ["hello ", ""]});
    });

    test("a stop string split across pieces: the start is held back, then dropped", () => {
        const result = run(["\n\nUser:"], ["Hi", " there\n", "\nUs", "er:", " more"]);
        assert.equal(result.text, "Hi there");
        assert.ok(result.stopped);
        assert.equal(result.outputs.join("").includes("\n"), false);
        assert.deepEqual(result.outputs.slice(0, 2), ["Hi", " there"]);
    });

    test("held text that turns out not to be a stop string is released", () => {
        const result = run(["STOP"], ["ab S", "T", "x", "yz"]);
        assert.deepEqual(result.outputs, ["ab ", "", "STx", "yz", ""]);
        assert.equal(result.stopped, false);
    });

    test("the earliest of several stop strings wins; a partial match at the very end is released by flush", () => {
        assert.equal(run(["cd", "b"], ["abcd"]).text, "a");
        assert.deepEqual(run(["xyz"], ["abc x"]), {text: "abc x", stopped: false, outputs: ["abc ", "x"]});
    });

    test("multi-byte text: emoji and CJK around a stop string", () => {
        assert.equal(run(["。"], ["你好", "世界。再见"]).text, "你好世界");
        assert.equal(run(["🛑"], ["go 🚀", " 🛑 no"]).text, "go 🚀 ");
    });

    test("after stopping, nothing more comes out", () => {
        const matcher = new StopStringMatcher(["."]);
        assert.equal(matcher.push("a.b"), "a");
        assert.equal(matcher.push("more"), "");
        assert.equal(matcher.flush(), "");
    });
});
