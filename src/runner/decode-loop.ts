/**
 * lmd's own decode loop for a context's generations. node-llama-cpp's LlamaCompletion and LlamaChat
 * take each next token from the sequence's `evaluate()` generator, whose implementation goes through
 * the context's batch dispatcher: main-thread JavaScript per token (a sampler config, locks,
 * queued-decode bookkeeping, token meters, timers) that a small host takes from ggml's decoding
 * threads (docs/benchmarks/history.md, "lmd's own decode loop"). runner/fast-evaluate.ts gives
 * each sequence an `evaluate` that asks this loop for its tokens.
 *
 * Each step puts every waiting sequence's tokens into one batch (continuing generations first, then
 * prompts up to the batch size, or up to their time slice of it while generations run:
 * runner/step-select.ts; a prompt's piece that goes on past the step decodes just before, on its
 * own), decodes it, samples each sequence's next token right behind the decode on the same libuv
 * thread, and hands the tokens back. The next step starts once every generation that goes on has
 * queued its next token. It holds node-llama-cpp's context lock for each step, so decodes
 * node-llama-cpp dispatches itself never overlap it. A sequence's tokens and position are recorded
 * as node-llama-cpp's own evaluation records them, and its token meter counts as node-llama-cpp
 * counts (runner/llama-internals.ts).
 */
import { DisposedError, withLock } from "lifecycle-utils";
import type { LlamaContext, Token } from "node-llama-cpp";
import type { ContextInternals, SequenceInternals } from "./llama-internals.js";
import { PrefillBudget } from "./prefill-budget.js";
import { selectStep, type Item, type Request } from "./step-select.js";

/**
 * With a single libuv thread (a runner's UV_THREADPOOL_SIZE=1), native work runs in the order it is
 * queued: a sequence's sampling queued right after the decode runs as soon as the decode ends,
 * without waking the main thread in between.
 */
const sampleBehindDecode = process.env.UV_THREADPOOL_SIZE === "1";

/** One context's decode steps. */
export class DecodeLoop {
  private readonly queue: Request[] = [];
  private running = false;
  /** The last step left single tokens for this one (see select). */
  private deferredSingles = false;
  /** When the last decode was queued (performance.now()). */
  private lastDecodeAt = -Infinity;
  private immediate: NodeJS.Immediate | undefined;
  /** The last step handed tokens. */
  private handedLast = false;
  /** The sequences the last step handed a token that have not asked for their next one yet. */
  private readonly awaited = new Set<SequenceInternals>();

  /**
   * @param onDecode called right after each step's first decode is queued, with how long the step
   * is expected to take (ms: the time since the one before, or Infinity when it carries a prompt's
   * tokens): the moment to write output gathered meanwhile, while the decode runs (runner/outbox.ts).
   * @param prefill how many prompt tokens a step takes beside running generations.
   */
  constructor(
    private readonly context: LlamaContext,
    private readonly onDecode?: (expectedMs: number) => void,
    private readonly prefill: Pick<PrefillBudget, "observe" | "tokens"> = new PrefillBudget(),
    /** Called as each step starts (runner/awake.ts). */
    private readonly onStart?: () => void,
  ) {}

  /** True while a step is waiting for the context or decoding. */
  get busy(): boolean {
    return this.running;
  }

  /** Decodes `tokens` after what the sequence holds; resolves to the token sampled after the last one. */
  next(sequence: SequenceInternals, tokens: Token[], sample: (logit: number) => Promise<number>): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.queue.push({ sequence, tokens, done: 0, sample, resolve, reject });
      this.awaited.delete(sequence);
      this.schedule();
    });
  }

  /** The next step: at once when every generation handed a token has queued its next, else after this turn (one ended or paused). */
  private schedule(): void {
    if (this.running || this.queue.length === 0) return;
    const ready = this.handedLast && this.awaited.size === 0;
    if (this.immediate !== undefined) {
      if (!ready) return;
      clearImmediate(this.immediate);
    }
    if (ready) return this.start();
    this.immediate = setImmediate(() => this.start());
  }

  private start(): void {
    this.immediate = undefined;
    this.running = true;
    this.handedLast = false;
    this.awaited.clear();
    this.onStart?.();
    void withLock([this.context, "context"], () => this.step()).finally(() => {
      this.running = false;
      this.schedule();
    });
  }

  private async step(): Promise<void> {
    const context = this.context as unknown as ContextInternals;
    // A sequence cleared for a new request (node-llama-cpp's patched erase sets this) queues its
    // prompt a few microtasks after the clearing released the lock: one turn lets it join this step.
    if (context._yieldBeforeNextBatch) {
      context._yieldBeforeNextBatch = false;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const items = this.select(context.batchSize);
    if (items.length === 0) return;
    const addon = context._ctx;
    // Ascending sequence ids: llama.cpp puts only consecutive increasing ids in one ubatch (see patches/).
    items.sort((a, b) => a.request.sequence._sequenceId - b.request.sequence._sequenceId);
    const queue = (batch: readonly Item[]): Promise<void> => {
      addon.initBatch(batch.reduce((sum, item) => sum + item.count, 0));
      for (const item of batch) {
        const { request, count } = item;
        const { sequence } = request;
        const last = request.done + count === request.tokens.length;
        const tokens = Uint32Array.from(request.tokens.slice(request.done, request.done + count));
        const logits = addon.addToBatch(sequence._sequenceId, sequence._nextTokenIndex, tokens, last ? Uint32Array.of(count - 1) : new Uint32Array(0));
        if (last) item.logit = logits[0];
        // As node-llama-cpp counts them (LlamaChat's results read the output count).
        sequence.tokenMeter.useTokens(last ? count - 1 : count, "input");
        sequence.tokenMeter.useTokens(last ? 1 : 0, "output");
      }
      return addon.decodeBatch();
    };
    // Prompt pieces that need no logits go first, in a decode of their own. In one batch with other
    // sequences' tokens, llama.cpp's split of a batch across per-sequence caches puts one token of a
    // piece in the others' micro-batch (whose attention then spans the piece's whole context) and
    // computes the rest one token short, below the size of ggml's tiled CPU flash attention
    // (GGML_FA_TILE_Q) when the piece is at it. The rest, whose logits are sampled, decode after it.
    const ahead = items.filter((item) => item.request.done + item.count < item.request.tokens.length);
    const rest = items.filter((item) => !ahead.includes(item));
    const split = ahead.length > 0 && rest.length > 0;
    let decoded: Promise<void>;
    try {
      decoded = queue(split ? ahead : items);
    } catch (err) {
      return this.fail(items, err); // nothing was queued
    }
    const now = performance.now();
    // A step with a prompt's tokens takes its own time, not the last step's.
    this.onDecode?.(items.some((item) => item.count > 1) ? Infinity : now - this.lastDecodeAt);
    this.lastDecodeAt = now;
    let restAt = now;
    if (split) {
      try {
        await decoded;
        restAt = performance.now();
        this.prefill.observe(ahead.reduce((sum, item) => sum + item.count, 0), 0, restAt - now);
        decoded = queue(rest);
      } catch (err) {
        return this.fail(items, err); // what the first decode added is removed with the rest
      }
    }
    // Sampling starts each sequence's sampler (its config can throw: that request fails alone).
    const startSampling = () => {
      for (const item of items) {
        if (item.logit === undefined) continue;
        try {
          item.sampled = item.request.sample(item.logit);
        } catch (err) {
          item.sampled = Promise.reject(err);
        }
        item.sampled.catch(() => undefined); // handed to the request below
      }
    };
    if (sampleBehindDecode) startSampling();
    try {
      await decoded;
    } catch (err) {
      await Promise.allSettled(items.flatMap((item) => item.sampled ?? []));
      return this.fail(items, err);
    }
    const last = split ? rest : items;
    const singles = last.filter((item) => item.count === 1).length;
    this.prefill.observe(last.reduce((sum, item) => sum + item.count, 0) - singles, singles, performance.now() - restAt);
    if (!sampleBehindDecode) startSampling();
    for (const item of items) {
      const { request, count } = item;
      // The sequence holds what was decoded, as node-llama-cpp's own evaluation records it.
      const { sequence } = request;
      for (let i = request.done; i < request.done + count; i++) sequence._contextTokens.push(request.tokens[i]!);
      sequence._nextTokenIndex += count;
      request.done += count;
      if (item.sampled === undefined) continue;
      this.remove(request);
      this.awaited.add(sequence);
      this.handedLast = true;
      item.sampled.then(request.resolve, request.reject);
    }
    // Each request is handed its token when its sampling ends; the step ends when all have.
    await Promise.allSettled(items.flatMap((item) => item.sampled ?? []));
  }

  /** What the next step decodes (runner/step-select.ts); requests of disposed sequences fail first. */
  private select(batchSize: number): Item[] {
    for (const request of [...this.queue]) {
      if (!request.sequence.disposed) continue;
      this.remove(request);
      request.reject(new DisposedError());
    }
    const { items, deferred } = selectStep(this.queue, batchSize, this.prefill, this.deferredSingles);
    this.deferredSingles = deferred;
    return items;
  }

  /**
   * The requests of a step that could not be decoded fail; the others stay queued. Whatever the
   * failed decode left in the KV cache past what each sequence records is removed, so that the
   * sequence's next request finds the cache as its tokens say.
   */
  private fail(items: readonly Item[], err: unknown): void {
    const addon = (this.context as unknown as ContextInternals)._ctx;
    for (const { request } of items) {
      this.remove(request);
      addon.removeTokenCellsFromSequence(request.sequence._sequenceId, request.sequence._nextTokenIndex, -1);
      request.reject(err);
    }
  }

  private remove(request: Request): void {
    const index = this.queue.indexOf(request);
    if (index >= 0) this.queue.splice(index, 1);
  }
}
