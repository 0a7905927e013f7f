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
    arrived: boolean
};

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

    /**
     * `onStepEnd`: called whenever every member has arrived or left (a release, or nobody running), after
     * the waiters are resolved (their continuations run after it).
     */
    constructor(batchSize: number, private readonly onStepEnd: () => void = () => undefined) {
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
        const member: StepMember = {order, submittedTurn: Infinity, arrived: false};
        this.members.add(member);
        return member;
    }

    /** A member's work for the coming step (its prompt, or its prompt's rest: `tokens`) is being submitted now. */
    submitted(member: StepMember, tokens: number): void {
        member.submittedTurn = this.turns.submit(tokens);
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
            this.releaseIfComplete();
        });
    }

    private releaseIfComplete(): void {
        if (this.waiting.length < this.members.size)
            return;
        const release = this.waiting.concat(this.observers).sort((a, b) => a.order - b.order);
        this.waiting = [];
        this.observers = [];
        this.leftThisStep = 0;
        this.stepTurn = -Infinity;
        // Every member arrived; their continuations queue their next decodes in this turn (one token each): one batch.
        const turn = this.turns.submit(this.members.size);
        for (const member of this.members) {
            member.submittedTurn = turn;
            member.arrived = false;
        }
        for (const waiter of release)
            waiter.resolve();
        this.onStepEnd();
    }
}
