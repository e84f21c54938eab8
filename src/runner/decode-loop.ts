/**
 * lmd's own decode loop for a context's generations. node-llama-cpp's LlamaCompletion and LlamaChat
 * take each next token from the sequence's `evaluate()` generator, whose implementation goes through
 * the context's batch dispatcher: main-thread JavaScript per token (a sampler config, locks,
 * queued-decode bookkeeping, token meters, timers) that a small host takes from ggml's decoding
 * threads (docs/benchmarks/history.md, "lmd's own decode loop").
 *
 * {@link fastEvaluate} gives a sequence an `evaluate` of its own built on a {@link DecodeLoop}: each
 * step puts every waiting sequence's tokens into one batch (continuing generations first, then
 * prompts up to the batch size, or up to their time slice of it while generations run; a prompt's
 * piece that goes on past the step decodes just before, on its own), decodes it, samples each
 * sequence's next token right behind the decode on the same libuv thread, and hands the tokens back.
 * The next step starts once every generation that goes on has queued its next token. It holds
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
import type { LlamaContext, LlamaContextSequence, Token, TokenMeter } from "node-llama-cpp";
import type { PauseSwitch } from "./flow.js";
import { PrefillBudget, promptPiece } from "./prefill-budget.js";
import { samplerConfigurer, type AddonSampler } from "./sampler-config.js";

type Evaluate = LlamaContextSequence["evaluate"];
type EvaluateOptions = NonNullable<Parameters<Evaluate>[1]>;

/** The addon calls the loop makes (node-llama-cpp's AddonContext and AddonSampler); bench/ times them directly. */
export interface AddonContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenSequenceIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: AddonSampler): Promise<number>;
  removeTokenCellsFromSequence(sequenceId: number, startPos: number, endPos: number): boolean;
}
interface ContextInternals {
  _ctx: AddonContext;
  /** Set by the patched node-llama-cpp when a sequence erases tokens (see step). */
  _yieldBeforeNextBatch?: boolean;
  batchSize: number;
  contextSize: number;
}
interface SequenceInternals {
  _sequenceId: number;
  _nextTokenIndex: number;
  _contextTokens: Token[];
  _resolveSamplerConfig(options: EvaluateOptions): unknown;
  /** The patched node-llama-cpp keeps a sampler ready per model (patches/); without it one is made here. */
  model: {
    _takeSampler?(): AddonSampler; _prepareSampler?(): void; _model: unknown;
    _llama: { _bindings: { AddonSampler: new (model: unknown) => AddonSampler } };
  };
  tokenPredictor: unknown;
  tokenMeter: TokenMeter;
  needsCheckpoints: boolean;
  disposed: boolean;
  context: ContextInternals;
}

/** One sequence's tokens waiting for a step; `sample` is the sampling of the last one's logits. */
interface Request {
  sequence: SequenceInternals;
  tokens: Token[];
  /** How many of `tokens` earlier steps have decoded (a prompt longer than the batch takes several). */
  done: number;
  /** Samples the token after the last one from the batch's logits at this index. */
  sample: (logit: number) => Promise<number>;
  resolve(token: number): void;
  reject(err: unknown): void;
}

/** A request's part in one step: `count` of its tokens; `logit` where its last token is among them. */
interface Item {
  request: Request;
  count: number;
  logit?: number;
  sampled?: Promise<number>;
}

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

  /**
   * What the next step decodes: continuing generations (one token each) first, then prompts in the
   * order they came, up to the batch size. With a KV cache per sequence, llama.cpp computes a batch
   * that mixes single tokens with prompt ends as separate micro-batches anyway and hands out every
   * logit at the end: the prompt ends go alone first (their sequences get a first token one step
   * sooner, at no cost), and the single tokens in the next step with no prompt beside them, never
   * deferred twice in a row. A prompt that goes on past this batch shares it, so that no generation
   * stalls behind a long prompt, and while generations run, prompts take only their time budget of
   * it, in pieces of at least MIN_TOKENS (runner/prefill-budget.ts).
   */
  private select(batchSize: number): Item[] {
    for (const request of [...this.queue]) {
      if (!request.sequence.disposed) continue;
      this.remove(request);
      request.reject(new DisposedError());
    }
    const ordered = [...this.queue.filter((r) => r.tokens.length - r.done === 1), ...this.queue.filter((r) => r.tokens.length - r.done !== 1)];
    const items: Item[] = [];
    const generating = ordered[0] !== undefined && ordered[0].tokens.length - ordered[0].done === 1;
    const deferredBefore = this.deferredSingles;
    this.deferredSingles = false;
    let room = batchSize;
    // Singles deferred by the last step go alone now: their gap spans one prompt share, not two.
    let promptRoom = deferredBefore && generating ? 0 : this.prefill.tokens(batchSize, generating);
    /** What the batch holds for prompts once this step's generations are in. */
    let promptBatch: number | undefined;
    for (const request of ordered) {
      const left = request.tokens.length - request.done;
      let count = Math.min(room, left === 1 ? 1 : promptRoom, left);
      if (left > 1 && generating) count = promptPiece(left, count, room, (promptBatch ??= room));
      if (count <= 0) continue;
      items.push({ request, count });
      room -= count;
      if (left > 1) promptRoom -= count;
    }
    const several = items.filter((item) => item.count > 1);
    const continues = several.some((item) => item.request.done + item.count < item.request.tokens.length);
    if (deferredBefore || several.length === 0 || several.length === items.length || continues) return items;
    this.deferredSingles = true;
    return several;
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

/**
 * Gives `sequence` an `evaluate` that decodes on `loop` where it can (see the module comment), and
 * waits between tokens while `pause()` (the job holding the sequence now) is paused, as
 * runner/flow.ts does for node-llama-cpp's own evaluation.
 */
export function fastEvaluate(sequence: LlamaContextSequence, loop: DecodeLoop, pause: () => PauseSwitch | undefined): void {
  const inner = sequence as unknown as SequenceInternals;
  const original = sequence.evaluate.bind(sequence);
  const context = inner.context;
  sequence.evaluate = async function* (tokens: Token[], options: EvaluateOptions = {}) {
    if (inner.tokenPredictor != null || inner.needsCheckpoints) return yield* original(tokens, options);
    const { model } = inner;
    const sampler = model._takeSampler?.() ?? new model._llama._bindings.AddonSampler(model._model);
    const configure = samplerConfigurer(sampler, options, () => inner._resolveSamplerConfig(options));
    let pending = tokens;
    try {
      while (pending.length > 0) {
        // A context shift is node-llama-cpp's: it takes over for the rest of this evaluation (with a
        // sampler of its own). LlamaCompletion and LlamaChat shift the context themselves before that.
        if (inner._nextTokenIndex + pending.length > context.contextSize - 1) return yield* original(pending, options);
        const paused = pause()?.waiting;
        if (paused) await paused;
        const token = await loop.next(inner, pending, (logit) => {
          configure();
          return context._ctx.sampleToken(logit, sampler);
        });
        if (token === -1) throw new Error("Failed to sample next token");
        if (options.yieldEogToken !== true && sequence.model.isEogToken(token as Token)) return;
        const replacement: Token | Token[] | void = yield token as Token;
        pending = Array.isArray(replacement) ? replacement.slice() : replacement != null ? [replacement] : [token as Token];
      }
    } finally {
      sampler.dispose();
      model._prepareSampler?.();
    }
  } as Evaluate;
}
