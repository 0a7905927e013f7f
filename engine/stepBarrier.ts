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

export class StepBarrier {
    private members = 0;
    private waiting: Waiter[] = [];
    private observers: Waiter[] = [];
    /** Members that left since the last release (finished, cancelled, failed) instead of arriving. */
    private leftThisStep = 0;
    private checkQueued = false;

    /**
     * `onStepEnd`: called whenever every member has arrived or left (a release, or nobody running), after
     * the waiters are resolved (their continuations run after it).
     */
    constructor(private readonly onStepEnd: () => void = () => undefined) {}

    /** Resolves at the next release (at once when nobody is running): when to start a prefill. `order`: see `arrive`. */
    nextStep(order: number): Promise<void> {
        const next = new Promise<void>((resolve) => this.observers.push({order, resolve}));
        this.queueCheck();
        return next;
    }

    /** Requests decoding in every step. */
    get memberCount(): number {
        return this.members;
    }

    /**
     * Some members have taken this step's token and others not yet: the step's outputs are incomplete
     * (with node-llama-cpp each sequence samples in its own native task, finishing in separate turns).
     */
    get stepInProgress(): boolean {
        return this.waiting.length < this.members && (this.waiting.length > 0 || this.leftThisStep > 0);
    }

    /** A request takes part in every step from now on (from the submission of its prompt's rest). */
    join(): void {
        this.members++;
    }

    /** A request stops running (finished, cancelled, preempted, failed). */
    leave(): void {
        this.members--;
        this.leftThisStep++;
        this.queueCheck();
    }

    /**
     * Waits until every running request has arrived for this step. Waiters are released in `order`
     * (the sequence index), so their decodes are queued — and batched — in the same sequence order
     * every step: llama.cpp reuses the previous step's compute graph only when the batch has the same
     * sequences in the same order, instead of building and allocating it again.
     */
    arrive(order: number): Promise<void> {
        const arrived = new Promise<void>((resolve) => this.waiting.push({order, resolve}));
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
        if (this.waiting.length < this.members)
            return;
        const release = this.waiting.concat(this.observers).sort((a, b) => a.order - b.order);
        this.waiting = [];
        this.observers = [];
        this.leftThisStep = 0;
        for (const waiter of release)
            waiter.resolve();
        this.onStepEnd();
    }
}
