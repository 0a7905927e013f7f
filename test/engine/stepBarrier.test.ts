/**
 * StepBarrier's account of which step members' samples are in flight: the engine holds a step's outputs
 * for those (so one outputs message is one step) but not for a prompt that may evaluate in a later batch.
 * node-llama-cpp dispatches the work queued in one event-loop turn as one batch when it fits the batch size.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {StepBarrier} from "../../engine/stepBarrier.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Two members whose prompts (`tokensA`, `tokensB`) are submitted in one turn, seen from the next turn, with A arrived. */
async function twoPromptsInOneTurn(tokensA: number, tokensB: number): Promise<StepBarrier> {
    const barrier = new StepBarrier(512);
    const a = barrier.join(0), b = barrier.join(1);
    barrier.submitted(a, tokensA);
    barrier.submitted(b, tokensB);
    await nextTurn();
    assert.equal(barrier.samplesInFlight, false, "nobody has arrived: no step in progress to wait for");
    void barrier.arrive(a);
    assert.equal(barrier.stepInProgress, true);
    return barrier;
}

describe("StepBarrier.samplesInFlight", () => {
    test("prompts submitted in one turn that fit one batch: once one has its token, the others' are in flight", async () => {
        assert.equal((await twoPromptsInOneTurn(200, 300)).samplesInFlight, true);
    });

    test("prompts submitted in one turn that overflow the batch: the others may come in a later batch", async () => {
        assert.equal((await twoPromptsInOneTurn(40, 480)).samplesInFlight, false);
    });

    test("a prompt submitted in a later turn, or not yet, is in a later batch", async () => {
        const barrier = new StepBarrier(512);
        const a = barrier.join(0), b = barrier.join(1);
        barrier.join(2);
        barrier.submitted(a, 10);
        await nextTurn();
        barrier.submitted(b, 10);
        void barrier.arrive(a);
        assert.equal(barrier.samplesInFlight, false, "b went in after a's batch; the third member has submitted nothing");
    });

    test("after a release every member's next decode is in one batch, with a prefill chunk counted in it", async () => {
        const barrier = new StepBarrier(64);
        const members = [0, 1, 2].map((order) => barrier.join(order));
        for (const member of members)
            barrier.submitted(member, 5);
        await nextTurn();
        const released = members.map((member) => barrier.arrive(member));
        await Promise.all(released);
        // The release's turn: three decodes of one token each, plus a chunk that still fits.
        barrier.submittedChunk(61);
        await nextTurn();
        void barrier.arrive(members[0]!);
        assert.equal(barrier.samplesInFlight, true);
        const arrivals = [barrier.arrive(members[1]!), barrier.arrive(members[2]!)];
        await Promise.all(arrivals);
        // Next step: a chunk that overflows the batch (3 + 62 > 64) with the decodes.
        barrier.submittedChunk(62);
        await nextTurn();
        void barrier.arrive(members[0]!);
        assert.equal(barrier.samplesInFlight, false);
    });

    test("a member that leaves counts as arrived for the step's batch; the step ends when the rest arrive", async () => {
        let ends = 0;
        const barrier = new StepBarrier(512, () => ends++);
        const a = barrier.join(0), b = barrier.join(1);
        barrier.submitted(a, 10);
        barrier.submitted(b, 10);
        await nextTurn();
        barrier.leave(a);
        assert.equal(barrier.samplesInFlight, true, "a's batch had b's prompt in it");
        await barrier.arrive(b);
        assert.equal(ends, 1);
        assert.equal(barrier.stepInProgress, false);
    });
});
