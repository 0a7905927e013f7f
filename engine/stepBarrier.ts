/**
 * Keeps the running requests stepping together, as one continuous batch.
 *
 * node-llama-cpp batches the decodes that are queued when it dispatches. Requests that start at
 * different moments would otherwise drift into alternate batches (A decodes while B prefills, then B
 * while A…) and never share one again, halving the tokens per batch. Each running request arrives here
 * after taking its token; when every member has arrived, all continue in the same tick, so their next
 * decodes — and the prefill of any request that just started — land in one batch: vLLM's "one scheduler
 * step for all running requests".
 *
 * A request joins when the rest of its prompt is submitted, so the step that evaluates it releases only
 * once its first token is there too; a request whose prompt goes in chunks while others decode waits for
 * releases (`nextStep`) without being a member until then, so the others keep decoding meanwhile.
 */
type Waiter = {order: number, resolve: () => void};

/** A running request's place in the steps. */
export type StepMember = {
    /** Its sequence index: the order its decode is queued in (see `arrive`). */
    readonly order: number,
    /** The event-loop turn its work for the current step was submitted in (Infinity: not yet). */
    submittedTurn: number,
    arrived: boolean,
    /** It has sampled this step's token (`tokenIn`). */
    tokenIn: boolean
};

/**
 * What a member's freshly sampled token means for decoding it ahead (`tokenIn`): it goes on and can be decoded before the
 * engine handles it ("continues"), it ends the request ("ends"), or the request's next sample reads what the engine makes
 * of it, so its decode waits for the engine ("waits").
 */
export type TokenOutlook = "continues" | "ends" | "waits";

/** What the barrier asks and tells its owner (the engine). */
export type StepHooks = {
    /**
     * Called whenever every member has arrived or left (a release, or nobody running), after the waiters are resolved
     * (their continuations run after it).
     */
    onStepEnd?: () => void,
    /**
     * Asked once every member has its token, whether the step's decodes may be queued then (nothing else waits to join the
     * next batch). Without it, never.
     */
    mayDecodeAhead?: () => boolean
};

type AheadWaiter = {order: number, member: StepMember, resolve: (together: number) => void};

/**
 * Numbers event-loop turns and counts the tokens submitted in each: node-llama-cpp dispatches what was
 * queued in one turn (on the next `setImmediate`) as one batch when it fits the batch size, so work
 * submitted in one turn that fits is evaluated together; work of a later turn, or of a turn that
 * overflowed, may be evaluated in a later batch.
 */
class SubmissionTurns {
    private turn = 0;
    private endQueued = false;
    /** Tokens submitted in recent turns (older ones are forgotten: a member that old is not in this batch). */
    private readonly tokens = new Map<number, number>();

    constructor(private readonly batchSize: number) {}

    /** The current turn, with `tokens` more submitted in it. */
    submit(tokens: number): number {
        if (!this.endQueued) {
            this.endQueued = true;
            setImmediate(() => {
                this.turn++;
                this.endQueued = false;
                this.tokens.delete(this.turn - 16);
            });
        }
        this.tokens.set(this.turn, (this.tokens.get(this.turn) ?? 0) + tokens);
        return this.turn;
    }

    /** Whether what was submitted in `turn` went in one batch. */
    fitOneBatch(turn: number): boolean {
        const tokens = this.tokens.get(turn);
        return tokens !== undefined && tokens <= this.batchSize;
    }
}

export class StepBarrier {
    private readonly members = new Set<StepMember>();
    private readonly turns: SubmissionTurns;
    private waiting: Waiter[] = [];
    private observers: Waiter[] = [];
    /** Members that left since the last release (finished, cancelled, failed) instead of arriving. */
    private leftThisStep = 0;
    /** The latest turn in which the work of a member that arrived or left this step was submitted. */
    private stepTurn = -Infinity;
    private checkQueued = false;
    /** Members whose token of this step goes on, waiting to learn whether it is decoded ahead (`tokenIn`). */
    private aheadWaiters: AheadWaiter[] = [];
    /** A member's token of this step cannot be decoded ahead: nobody's is. */
    private aheadBlocked = false;
    /** Whether this step's decodes go ahead is decided (`decideAhead`). */
    private aheadDecided = false;
    /** This step's decodes were queued when the tokens came in, not at the release. */
    private decodedAhead = false;

    constructor(batchSize: number, private readonly hooks: StepHooks = {}) {
        this.turns = new SubmissionTurns(batchSize);
    }

    /** Resolves at the next release (at once when nobody is running): when to start a prefill. `order`: see `arrive`. */
    nextStep(order: number): Promise<void> {
        const next = new Promise<void>((resolve) => this.observers.push({order, resolve}));
        this.queueCheck();
        return next;
    }

    /** Requests decoding in every step. */
    get memberCount(): number {
        return this.members.size;
    }

    /**
     * Some members have taken this step's token and others not yet: the step's outputs are incomplete
     * (with node-llama-cpp each sequence samples in its own native task, finishing in separate turns).
     */
    get stepInProgress(): boolean {
        return this.waiting.length < this.members.size && (this.waiting.length > 0 || this.leftThisStep > 0);
    }

    /**
     * A step in progress waits for members whose work went in the same batch as the work of those that
     * arrived: their samples are in flight and end within a fraction of a millisecond of the others'
     * (later only when the event loop or the sampling thread is held up). Otherwise the members missing
     * submitted their prompts later, or in a turn whose work overflowed one batch: those may evaluate in a
     * later batch and take seconds.
     */
    get samplesInFlight(): boolean {
        for (const member of this.members)
            if (!member.arrived && member.submittedTurn <= this.stepTurn && this.turns.fitOneBatch(member.submittedTurn))
                return true;
        return false;
    }

    /** A request takes part in every step from now on (from the submission of its prompt's rest). */
    join(order: number): StepMember {
        const member: StepMember = {order, submittedTurn: Infinity, arrived: false, tokenIn: false};
        this.members.add(member);
        this.queueCheck(); // the step is no longer one batch: nobody waits to decode ahead
        return member;
    }

    /** A member's work for the coming step (its prompt, or its prompt's rest: `tokens`) is being submitted now. */
    submitted(member: StepMember, tokens: number): void {
        member.submittedTurn = this.turns.submit(tokens);
        this.queueCheck();
    }

    /** Tokens of a request that is not a member yet (a prefill chunk) are being submitted now, in the batch of this turn. */
    submittedChunk(tokens: number): void {
        this.turns.submit(tokens);
    }

    /** A request stops running (finished, cancelled, preempted, failed). */
    leave(member: StepMember): void {
        if (!this.members.delete(member))
            return;
        this.stepTurn = Math.max(this.stepTurn, member.submittedTurn === Infinity ? -Infinity : member.submittedTurn);
        this.leftThisStep++;
        this.queueCheck();
    }

    /**
     * A member has sampled this step's token, before the engine handles it. With two or more members whose tokens all go
     * on, their next decodes can be queued as soon as the last token is in, in one batch, so the engine's work on the
     * tokens (text, stop strings, outputs) runs beside that decode instead of ahead of it: llama-server's loop samples and
     * queues the next batch before it sends anything. For "continues" this resolves once every member's token is in:
     * with the number of continuing members, each to hand its decode over now (waiters resume in `order`, in one turn,
     * and their decodes go in one batch: leanDecode.ts, `DecodeAhead`); with 0, as soon as that is known, where the step
     * goes on as without: a member's next sample waits for the engine, the step's work was not one batch (a token already
     * sampled never waits for a prompt that evaluates in a later batch), or `mayDecodeAhead` says no. Any other outlook
     * returns false at once. A member that leaves no longer counts.
     */
    tokenIn(member: StepMember, outlook: TokenOutlook): Promise<number> | false {
        if (!this.members.has(member) || member.tokenIn)
            return false;
        member.tokenIn = true;
        if (outlook === "waits")
            this.aheadBlocked = true;
        const ahead = outlook === "continues" && !this.aheadDecided
            ? new Promise<number>((resolve) => this.aheadWaiters.push({order: member.order, member, resolve})) : false;
        this.queueCheck();
        return ahead;
    }

    /**
     * Waits until every running request has arrived for this step. Waiters are released in `order`
     * (the sequence index), so their decodes are queued — and batched — in the same sequence order
     * every step: llama.cpp reuses the previous step's compute graph only when the batch has the same
     * sequences in the same order, instead of building and allocating it again.
     */
    arrive(member: StepMember): Promise<void> {
        member.arrived = true;
        this.stepTurn = Math.max(this.stepTurn, member.submittedTurn);
        const arrived = new Promise<void>((resolve) => this.waiting.push({order: member.order, resolve}));
        this.queueCheck();
        return arrived;
    }

    /**
     * Checks after the current synchronous work (and the microtasks queued before it): requests
     * admitted together — one IPC read, or one in-process burst — all join before the first step.
     */
    private queueCheck(): void {
        if (this.checkQueued)
            return;
        this.checkQueued = true;
        queueMicrotask(() => {
            this.checkQueued = false;
            this.decideAhead();
            this.releaseIfComplete();
        });
    }

    /**
     * Whether this step's work is exactly one batch: every member's was submitted in the same turn, and it fit. Otherwise
     * a member's token may come from a later batch (a prompt that joined later, or overflowed), and nobody waits for it.
     */
    private plainStep(): boolean {
        let turn: number | undefined;
        for (const member of this.members) {
            if (turn !== undefined && member.submittedTurn !== turn)
                return false;
            turn = member.submittedTurn;
        }
        return turn !== undefined && this.turns.fitOneBatch(turn);
    }

    /**
     * Decides, once per step, whether the continuing members queue their decodes now: when every member's token of the
     * step's one batch is in. Decided at once (not ahead) where that cannot be: a member's next sample waits for the
     * engine, or the step is not one batch.
     */
    private decideAhead(): void {
        if (this.aheadDecided || this.aheadWaiters.length === 0)
            return;
        const plain = this.plainStep();
        let allIn = true;
        for (const member of this.members)
            allIn &&= member.tokenIn;
        if (plain && !this.aheadBlocked && !allIn)
            return;
        this.aheadDecided = true;
        const waiters = this.aheadWaiters.filter((waiter) => this.members.has(waiter.member)).sort((a, b) => a.order - b.order);
        this.aheadWaiters = [];
        const ahead = plain && !this.aheadBlocked && allIn && waiters.length > 0 && this.hooks.mayDecodeAhead?.() === true;
        if (ahead) {
            this.decodedAhead = true;
            const turn = this.turns.submit(waiters.length);
            for (const waiter of waiters)
                waiter.member.submittedTurn = turn;
        }
        for (const waiter of waiters)
            waiter.resolve(ahead ? waiters.length : 0);
    }

    private releaseIfComplete(): void {
        if (this.waiting.length < this.members.size)
            return;
        const release = this.waiting.concat(this.observers).sort((a, b) => a.order - b.order);
        this.waiting = [];
        this.observers = [];
        this.leftThisStep = 0;
        this.stepTurn = -Infinity;
        if (!this.decodedAhead) {
            // Every member arrived; their continuations queue their next decodes in this turn (one token each): one batch.
            const turn = this.turns.submit(this.members.size);
            for (const member of this.members)
                member.submittedTurn = turn;
        }
        // Every member has taken its token (it arrived): the next tokens are the next step's.
        this.decodedAhead = false;
        this.aheadDecided = false;
        this.aheadBlocked = false;
        for (const waiter of this.aheadWaiters.splice(0))
            waiter.resolve(0);
        for (const member of this.members) {
            member.arrived = false;
            member.tokenIn = false;
        }
        for (const waiter of release)
            waiter.resolve();
        this.hooks.onStepEnd?.();
    }
}
