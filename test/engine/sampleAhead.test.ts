/**
 * engine/sampleAhead.ts's bookkeeping around node-llama-cpp's native batch calls, on a recording stand-in for the
 * native context: the order it queues work in and what it does with failures. The real thing, on a real model with
 * one libuv thread, is in leanDecode.test.ts.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import type {LlamaContext, Token} from "../../engine/llamaTypes.js";
import {installSampleAhead, sampleAheadOf, type NativeBatchContext, type NativeSample} from "../../engine/sampleAhead.js";

/** Records the calls in order; its methods are read-only on the prototype, as the addon's are. */
class RecordingContext implements NativeBatchContext {
    readonly calls: string[] = [];
    /** Batch logit indexes addToBatch hands out next, per sequence. */
    readonly logits = new Map<number, number[]>();

    initBatch(size: number): void {
        this.calls.push(`initBatch ${size}`);
    }

    addToBatch(sequenceId: number, _first: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array {
        this.calls.push(`add ${sequenceId} ${tokens.length}`);
        return Uint32Array.from(logitIndexes.length > 0 ? this.logits.get(sequenceId) ?? [] : []);
    }

    decodeBatch(): Promise<void> {
        this.calls.push("decode");
        return Promise.resolve();
    }
}
for (const name of ["initBatch", "addToBatch", "decodeBatch"] as const)
    Object.defineProperty(RecordingContext.prototype, name, {writable: false});

function installed(native: RecordingContext): NonNullable<ReturnType<typeof sampleAheadOf>> {
    assert.equal(installSampleAhead({_ctx: native} as unknown as LlamaContext, "1"), true);
    return sampleAheadOf(native)!;
}

const token = (value: number): NativeSample => value as Token;

describe("sample ahead", () => {
    test("installed only with one pool thread", () => {
        for (const size of [undefined, "", "4", "2", "01"])
            assert.equal(installSampleAhead({_ctx: new RecordingContext()} as unknown as LlamaContext, size), false, `size ${size}`);
        assert.equal(installSampleAhead({} as unknown as LlamaContext, "1"), false, "no native context");
    });

    test("a sample is queued right after the decode of its batch, and node-llama-cpp's ask gets that one", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        native.logits.set(2, [5]);
        const expected = ahead.expect(2, (index) => {
            native.calls.push(`sample ${index}`);
            return Promise.resolve(token(42));
        });
        native.initBatch(3);
        native.addToBatch(1, 0, Uint32Array.of(7), Uint32Array.of());
        native.addToBatch(2, 0, Uint32Array.of(8, 9), Uint32Array.of(1));
        assert.deepEqual(native.calls, ["initBatch 3", "add 1 1", "add 2 2"], "nothing sampled before the decode is queued");
        await native.decodeBatch();
        assert.deepEqual(native.calls.slice(3), ["decode", "sample 5"]);
        assert.equal(await expected.take(5), 42);
        assert.deepEqual(native.calls.slice(5), [], "asked for after the decode: no second sample");
        assert.equal(ahead.queuedAhead, 1);
    });

    test("a sample whose configuration throws fails its own request only, not the batch's decode", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        native.logits.set(0, [0]);
        const expected = ahead.expect(0, () => {
            throw new Error("bad sampler configuration");
        });
        native.initBatch(1);
        native.addToBatch(0, 0, Uint32Array.of(1), Uint32Array.of(0));
        await native.decodeBatch(); // resolves: the decode is every request's in the batch
        await assert.rejects(expected.take(0), /bad sampler configuration/);
    });

    test("no logits of the sequence in the batch: sampled when asked, as without sampling ahead", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        let sampled = 0;
        const expected = ahead.expect(3, () => Promise.resolve(token(++sampled)));
        native.initBatch(1);
        native.addToBatch(3, 0, Uint32Array.of(1), Uint32Array.of()); // a prompt's first part: no logits asked for
        await native.decodeBatch();
        assert.equal(sampled, 0);
        assert.equal(await expected.take(0), 1);
        assert.equal(ahead.queuedAhead, 0);
    });

    test("a batch that never reached its decode queues nothing in the next one; a forgotten expectation is never queued", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        native.logits.set(0, [0]);
        native.logits.set(1, [1]);
        let sampled = 0;
        ahead.expect(0, () => Promise.resolve(token(++sampled)));
        native.initBatch(1);
        native.addToBatch(0, 0, Uint32Array.of(1), Uint32Array.of(0));
        // node-llama-cpp failed the batch before decoding it: the next batch starts afresh.
        native.initBatch(1);
        const forgotten = ahead.expect(1, () => Promise.resolve(token(++sampled)));
        ahead.forget(1, forgotten);
        native.addToBatch(1, 0, Uint32Array.of(1), Uint32Array.of(0));
        await native.decodeBatch();
        assert.equal(sampled, 0);
        assert.equal(ahead.queuedAhead, 0);
    });

    test("`settled` resolves when the sample is queued behind its decode, or once it never will be", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        native.logits.set(0, [0]);
        let settled = 0;
        const expected = ahead.expect(0, () => Promise.resolve(token(1)));
        void expected.settled.then(() => settled++);
        native.initBatch(1);
        native.addToBatch(0, 0, Uint32Array.of(1), Uint32Array.of(0));
        await Promise.resolve();
        assert.equal(settled, 0, "settled before its decode was queued");
        void native.decodeBatch();
        await expected.settled;
        assert.equal(settled, 1);
        // Never queued: forgotten (its decode failed), or taken before any decode queued it.
        const forgotten = ahead.expect(0, () => Promise.resolve(token(2)));
        ahead.forget(0, forgotten);
        await forgotten.settled;
        const taken = ahead.expect(1, () => Promise.resolve(token(3)));
        assert.equal(await taken.take(0), 3);
        await taken.settled;
    });

    test("asked for another index than the one it sampled: a rejection for that request", async () => {
        const native = new RecordingContext();
        const ahead = installed(native);
        native.logits.set(0, [4]);
        const expected = ahead.expect(0, () => Promise.resolve(token(1)));
        native.initBatch(1);
        native.addToBatch(0, 0, Uint32Array.of(1), Uint32Array.of(0));
        await native.decodeBatch();
        await assert.rejects(expected.take(6), /queued for batch logit 4, asked for 6/);
    });
});
