/**
 * lmd's own decode loop for a context's generations. node-llama-cpp's LlamaCompletion and LlamaChat
 * take each next token from the sequence's `evaluate()` generator, whose implementation goes through
 * the context's batch dispatcher: main-thread JavaScript per token (a sampler config, locks,
 * queued-decode bookkeeping, token meters, timers) that a small host takes from ggml's decoding
 * threads (docs/benchmarks/history.md, "lmd's own decode loop").
 *
 * `fastEvaluate` (runner/fast-evaluate.ts) gives a sequence an `evaluate` of its own built on a
 * {@link DecodeLoop}: each step puts every waiting sequence's tokens into one batch (continuing
 * generations first, then prompts up to the batch size, or up to their time slice of it while
 * generations run; a prompt's piece that goes on past the step decodes just before, on its own),
 * decodes it, samples each sequence's next token right behind the decode on the same libuv thread,
 * and hands the tokens back.
 * The next step starts once every generation that goes on has queued its next token; decoding ahead
 * (runner/decode-ahead.ts), as soon as the tokens are sampled, with each of them in it. It holds
 * node-llama-cpp's context lock for each step, so decodes node-llama-cpp dispatches itself (the
 * cases below) never overlap it.
 *
 * The sampling is node-llama-cpp's own (`_resolveSamplerConfig` per token, one sampler per
 * evaluation), so temperature, top-k/p, min-p, seeds, repeat penalties, token biases and grammars
 * sample exactly as before. What this loop does not do goes to node-llama-cpp's `evaluate`
 * unchanged: a sequence with a token predictor (speculative decoding), a model that needs context
 * checkpoints (SWA, hybrid or recurrent memory), and tokens that would not fit in the context (its
 * context shift). The sequence's token meter counts as node-llama-cpp counts. Built on
 * node-llama-cpp 3.22.1's internals (`_ctx`, `_sequenceId`, `_nextTokenIndex`, `_contextTokens`,
 * `_resolveSamplerConfig`); the version is pinned.
 */
import { DisposedError, withLock } from "lifecycle-utils";
import type { LlamaContext, Token } from "node-llama-cpp";
import { Provisional } from "./decode-ahead.js";
import type { AddonContext, ContextInternals, Item, Request, SequenceInternals } from "./decode-types.js";
import { PrefillBudget } from "./prefill-budget.js";
import { selectStep } from "./step-select.js";

export type { AddonContext } from "./decode-types.js";

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
  /** Each sequence's token decoded ahead, until its generation asks for it or it is dropped. */
  private readonly provisional = new Map<SequenceInternals, Request>();
  /** Tokens sampled in the last step whose decode ahead is queued: handed over once the next step's decode is. */
  private handoffs: (() => void)[] = [];
  /** The step running now, settled when it ends. */
  private stepping: Promise<void> = Promise.resolve();

  /**
   * @param onDecode called right after each decode is queued, with the time since the one before
   * (ms): the moment to write output gathered meanwhile, while the decode runs (runner/outbox.ts).
   * @param prefill how many prompt tokens a step takes beside running generations.
   * @param decodesAhead decode each sampled token before its generation asks for it (runner/decode-ahead.ts).
   */
  constructor(
    private readonly context: LlamaContext,
    private readonly onDecode?: (sinceLastMs: number) => void,
    private readonly prefill: Pick<PrefillBudget, "observe" | "tokens"> = new PrefillBudget(),
    readonly decodesAhead = false,
  ) {}

  /** True while a step is waiting for the context or decoding. */
  get busy(): boolean {
    return this.running;
  }

  /**
   * Decodes `tokens` after what the sequence holds; resolves to the token sampled after the last one.
   * `ahead` says whether the generation goes on after a token (for decoding ahead).
   */
  next(sequence: SequenceInternals, tokens: Token[], sample: (logit: number) => Promise<number>, ahead?: (token: number) => boolean): Promise<number> {
    const provisional = this.provisional.get(sequence);
    if (provisional && tokens.length === 1 && tokens[0] === provisional.tokens[0]) {
      this.provisional.delete(sequence);
      return new Promise<number>((resolve, reject) => {
        Object.assign(provisional, { sample, ahead, resolve, reject });
        const state = provisional.provisional!;
        // Still queued: an ordinary request from now on.
        if (!state.stepped) provisional.provisional = undefined;
        state.settle(true);
        this.schedule();
      });
    }
    void this.drop(sequence); // a step of it ends before the next step, which decodes these
    return new Promise<number>((resolve, reject) => {
      this.queue.push({ sequence, tokens, done: 0, sample, ahead, resolve, reject });
      this.awaited.delete(sequence);
      this.schedule();
    });
  }

  /**
   * The sequence's generation ended or went elsewhere: its token decoded ahead is dropped. Resolves
   * once no decode of it runs and the KV cache holds nothing of it (before the sequence is reused,
   * saved or disposed).
   */
  drop(sequence: SequenceInternals): Promise<void> {
    const request = this.provisional.get(sequence);
    if (!request) return Promise.resolve();
    this.provisional.delete(sequence);
    const state = request.provisional!;
    state.settle(false);
    // Not decoded yet: it never will be. In a step (only the running one): the step takes the cell out.
    if (!state.stepped) return Promise.resolve(this.remove(request));
    return this.stepping;
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
    const stepping = withLock([this.context, "context"], () => this.step()).finally(() => {
      this.running = false;
      this.schedule();
    });
    this.stepping = stepping.catch(() => undefined);
  }

  private async step(): Promise<void> {
    // Tokens the last step decoded ahead go to their generations once this step's decode is queued.
    const handoffs = this.handoffs;
    this.handoffs = [];
    const handOver = () => handoffs.splice(0).forEach((handoff) => handoff());
    try {
      await this.decodeStep(handOver);
    } finally {
      handOver();
    }
  }

  private async decodeStep(handOver: () => void): Promise<void> {
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
        if (request.provisional) request.provisional.stepped = true;
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
    this.onDecode?.(now - this.lastDecodeAt);
    this.lastDecodeAt = now;
    handOver();
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
    // Sampling starts each sequence's sampler (its config can throw: that request fails alone); a
    // token decoded ahead is sampled after once its generation asks for it.
    const startSampling = () => {
      for (const item of items) {
        const { request, logit } = item;
        if (logit === undefined) continue;
        try {
          item.sampled = request.provisional ? request.provisional.confirmed.then(() => request.sample(logit)) : request.sample(logit);
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
      this.dropOpen(items);
      await Promise.allSettled(items.flatMap((item) => item.sampled ?? []));
      return this.fail(items, err);
    }
    const last = split ? rest : items;
    const singles = last.filter((item) => item.count === 1).length;
    this.prefill.observe(last.reduce((sum, item) => sum + item.count, 0) - singles, singles, performance.now() - restAt);
    await this.settleProvisional(items, addon);
    if (!sampleBehindDecode) startSampling();
    for (const item of items) {
      if (item.dropped) continue;
      const { request, count } = item;
      // The sequence holds what was decoded, as node-llama-cpp's own evaluation records it.
      const { sequence } = request;
      for (let i = request.done; i < request.done + count; i++) sequence._contextTokens.push(request.tokens[i]!);
      sequence._nextTokenIndex += count;
      request.done += count;
      // As node-llama-cpp counts them (LlamaChat's results read the output count).
      const sampled = item.logit === undefined ? 0 : 1;
      sequence.tokenMeter.useTokens(count - sampled, "input");
      sequence.tokenMeter.useTokens(sampled, "output");
      if (item.sampled === undefined) continue;
      this.remove(request);
      this.awaited.add(sequence);
      this.handedLast = true;
      item.sampled.then((token) => this.hand(request, token)).catch(request.reject);
    }
    // Each request is handed its token when its sampling ends; the step ends when all have.
    await Promise.allSettled(items.flatMap((item) => item.sampled ?? []));
  }

  /** Hands a sampled token to its generation; decoding ahead, its decode is queued first (see step). */
  private hand(request: Request, token: number): void {
    if (!this.decodesAhead || request.ahead?.(token) !== true) return request.resolve(token);
    const { sequence } = request;
    const next: Request = {
      sequence,
      tokens: [token as Token],
      done: 0,
      sample: request.sample,
      provisional: new Provisional(),
      resolve: () => undefined,
      reject: () => undefined,
    };
    this.queue.push(next);
    this.provisional.set(sequence, next);
    this.awaited.delete(sequence);
    this.handoffs.push(() => request.resolve(token));
  }

  /**
   * After the decode: the step's tokens decoded ahead whose generations have not asked for them wait
   * one turn of the event loop; those still not asked for then, or dropped, leave the KV cache.
   */
  private async settleProvisional(items: Item[], addon: AddonContext): Promise<void> {
    const open = items.filter((item) => item.request.provisional !== undefined && item.request.provisional.outcome === undefined);
    if (open.length > 0) {
      const turn = new Promise((resolve) => setImmediate(resolve));
      await Promise.race([Promise.allSettled(open.map((item) => item.request.provisional!.confirmed)), turn]);
    }
    this.dropOpen(items);
    for (const item of items) {
      const { request } = item;
      const state = request.provisional;
      if (!state) continue;
      request.provisional = undefined;
      if (state.outcome === true) continue;
      item.dropped = true;
      this.remove(request);
      const { sequence } = request;
      addon.removeTokenCellsFromSequence(sequence._sequenceId, sequence._nextTokenIndex, sequence._nextTokenIndex + 1);
    }
  }

  /** Drops the step's tokens decoded ahead that no generation has asked for yet. */
  private dropOpen(items: readonly Item[]): void {
    for (const { request } of items) {
      if (request.provisional?.outcome !== undefined || !request.provisional) continue;
      this.provisional.delete(request.sequence);
      request.provisional.settle(false);
    }
  }

  /** What the next step decodes (runner/step-select.ts); a request of a disposed sequence fails. */
  private select(batchSize: number): Item[] {
    for (const request of [...this.queue]) {
      if (!request.sequence.disposed) continue;
      this.remove(request);
      if (request.provisional) this.provisional.delete(request.sequence);
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
    this.dropOpen(items); // their generations ask again, as new requests
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
