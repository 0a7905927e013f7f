/**
 * StepBarrier's account of which step members' samples are in flight: the engine holds a step's outputs
 * for those (so one outputs message is one step) but not for a prompt that may evaluate in a later batch.
 * node-llama-cpp dispatches the work queued in one event-loop turn as one batch when it fits the batch size.
 */
import assert from "node:assert/strict";
import {describe, test} from "node:test";
import {type StepMember, StepBarrier} from "../../engine/stepBarrier.js";

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
        const barrier = new StepBarrier(512, {onStepEnd: () => ends++});
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

describe("StepBarrier.tokenIn (decoding a step ahead)", () => {
    /** A barrier whose members' work for the first step went in one batch (one turn), seen from the next turn. */
    async function oneBatch(members: number, may = true): Promise<{barrier: StepBarrier, members: StepMember[], asked: () => number}> {
        let asked = 0;
        const barrier = new StepBarrier(512, {mayDecodeAhead: () => {
            asked++;
            return may;
        }});
        const joined = Array.from({length: members}, (_, order) => barrier.join(order));
        for (const member of joined)
            barrier.submitted(member, 10);
        await nextTurn();
        return {barrier, members: joined, asked: () => asked};
    }

    /** Settles `promise` or gives "pending" after a turn. */
    const within = <T>(promise: Promise<T>) => Promise.race([promise, nextTurn().then(() => "pending" as const)]);

    test("once the last member's token is in, every continuing member queues its decode, in sequence order", async () => {
        const {barrier, members: [a, b, c], asked} = await oneBatch(3);
        const resumed: number[] = [];
        const waits = [c!, a!].map((member) => {
            const ahead = barrier.tokenIn(member, "continues");
            assert.ok(ahead instanceof Promise);
            return ahead.then((value) => {
                resumed.push(member.order);
                return value;
            });
        });
        assert.equal(await within(waits[0]!), "pending", "b's token is not in yet");
        assert.equal(barrier.tokenIn(b!, "ends"), false, "a token that ends its request is not decoded ahead");
        assert.deepEqual(await Promise.all(waits), [2, 2], "both continuing members decode ahead, together");
        assert.deepEqual(resumed, [0, 2], "resumed in sequence order, so the batch keeps the same order every step");
        assert.equal(asked(), 1);
        assert.equal(barrier.tokenIn(a!, "continues"), false, "one token per member and step");
    });

    test("the step after a step decoded ahead is one batch again; releases in between queue nothing", async () => {
        const {barrier, members, asked} = await oneBatch(2);
        for (let step = 0; step < 3; step++) {
            const aheads = members.map((member) => barrier.tokenIn(member, "continues") as Promise<number>);
            assert.deepEqual(await Promise.all(aheads), [2, 2], `step ${step}`);
            await Promise.all(members.map((member) => barrier.arrive(member)));
            await nextTurn();
        }
        assert.equal(asked(), 3);
    });

    test("a member whose next sample waits for the engine: nobody decodes ahead, and nobody waits for it", async () => {
        const {barrier, members: [a, b], asked} = await oneBatch(2);
        const ahead = barrier.tokenIn(a!, "continues");
        assert.equal(barrier.tokenIn(b!, "waits"), false);
        assert.equal(await ahead, 0);
        assert.equal(asked(), 0);
    });

    test("the owner says no (a prompt waits to join the next batch): nobody decodes ahead", async () => {
        const {barrier, members: [a, b]} = await oneBatch(2, false);
        const aheads = [a!, b!].map((member) => barrier.tokenIn(member, "continues") as Promise<number>);
        assert.deepEqual(await Promise.all(aheads), [0, 0]);
    });

    test("a token already sampled does not wait for a member whose work went in a later turn or is not submitted", async () => {
        const barrier = new StepBarrier(512, {mayDecodeAhead: () => true});
        const a = barrier.join(0), b = barrier.join(1);
        barrier.submitted(a, 10);
        await nextTurn();
        barrier.submitted(b, 10);
        assert.equal(await within(barrier.tokenIn(a, "continues") as Promise<number>), 0);
    });

    test("a member that joins while others wait ends the wait: its prompt goes in a later batch", async () => {
        const {barrier, members: [a]} = await oneBatch(2);
        const ahead = barrier.tokenIn(a!, "continues") as Promise<number>;
        assert.equal(await within(ahead), "pending");
        barrier.join(2);
        assert.equal(await within(ahead), 0);
    });

    test("a member that leaves no longer counts", async () => {
        const {barrier, members: [a, b]} = await oneBatch(2);
        const ahead = barrier.tokenIn(a!, "continues") as Promise<number>;
        assert.equal(await within(ahead), "pending");
        barrier.leave(b!);
        assert.equal(await ahead, 1);
    });
});
