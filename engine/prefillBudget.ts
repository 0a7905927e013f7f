/**
 * Chunked prefill's per-step prompt budget, handed out as vLLM's scheduler hands out its token budget: to the requests
 * evaluating their input in pieces, in the order they are served (priority, then arrival: the waiting queue's order),
 * each taking what it needs of what the ones ahead of it left. A second long prompt waits for the first instead of
 * halving its pieces: both no longer finish together at the end, the first is done about when it would be alone, and no
 * piece shrinks below the size llama.cpp evaluates efficiently (on CPU, ggml's flash attention runs its tiled kernel
 * only for 64 or more queries of one sequence; fewer go row by row, ~3× slower per token deep into a prompt).
 */
import {WaitingQueue, type Queueable} from "./waitingQueue.js";

/** Fewer budget tokens than this left in a step are not worth a piece: a request that needs more waits for the next step. */
const defaultMinPiece = 16;

export class PrefillBudget<Request extends Queueable> {
    private readonly order = new WaitingQueue<Request>();
    /** Each prefilling request's input tokens not yet evaluated, its last one included. */
    private readonly remaining = new Map<Request, number>();
    private readonly minPiece: number;

    constructor(readonly tokensPerStep: number, minPiece = defaultMinPiece) {
        this.minPiece = Math.min(minPiece, tokensPerStep);
    }

    /** Requests holding a place (from their first `set` to `leave`). */
    get size(): number {
        return this.remaining.size;
    }

    /** `request` evaluates its input in pieces from now on, `remaining` tokens of it left; or its progress (after a piece). */
    set(request: Request, remaining: number): void {
        if (!this.remaining.has(request))
            this.order.push(request);
        this.remaining.set(request, remaining);
    }

    /** `request` no longer takes from the budget: its rest has gone in (its first token is there), or it stopped. */
    leave(request: Request): void {
        if (this.remaining.delete(request))
            this.order.remove(request);
    }

    /**
     * `request`'s tokens in this step: at least all it has left (its whole rest goes in now), a piece of the budget, or 0
     * (nothing this step: the requests ahead took what there was). The same answer however often and in whatever order the
     * requests ask within a step, as long as none of them reports progress (`set`) in between.
     */
    shareOf(request: Request): number {
        let left = this.tokensPerStep;
        for (const other of this.order) {
            const wants = this.remaining.get(other)!;
            const takes = wants <= left ? wants : left >= this.minPiece ? left : 0;
            if (other === request)
                return takes;
            left -= takes;
        }
        return 0;
    }
}
