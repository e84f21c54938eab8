/**
 * The model a runner child has loaded: node-llama-cpp's Llama, the model, its one context of N
 * sequences (the slots), the LoRA adapters, the draft model and the saved prompt prefixes. Jobs take
 * a slot here (the free one sharing the longest prefix with their prompt: the prompt cache) and give
 * it back when they end; the embedding and ranking contexts are made here on their first use.
 */
import { withLock } from "lifecycle-utils";
import {
  InsufficientMemoryError,
  type Llama,
  type LlamaCompletion,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaGrammar,
  type LlamaModel,
  type LlamaRankingContext,
  type Token,
} from "node-llama-cpp";
import type { GrammarSpec } from "../types.js";
import type { DraftResources, SwitchablePredictor } from "../speculative.js";
import type { PauseSwitch } from "../flow.js";
import type { DecodeLoop } from "../decode-loop.js";
import { commonPrefix, type PrefixCache } from "../prefix-cache.js";
import { ThreadGovernor } from "../threads.js";
import { jsonGrammar } from "../json-grammar.js";
import { clientSafe, type ChildIo } from "./io.js";

/** One sequence of the model's context, with the completion object that drives it. */
export interface Slot {
  sequence: LlamaContextSequence;
  completion: LlamaCompletion;
  busy: boolean;
  lastUsed: number;
  /** Speculative decoding's predictor for this sequence, when the load asked for one. */
  predictor?: SwitchablePredictor | undefined;
  /** The pause switch of the job holding the slot now (runner/flow.ts). */
  pause?: PauseSwitch | undefined;
}

/** What a load made (runner/child/load.ts). */
export interface ModelParts {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  slots: Slot[];
  /** The decode loop of the context (runner/decode-loop.ts). */
  decodeLoop: DecodeLoop;
  modelFile: string;
  /** LoRA adapter files applied to the contexts (the embedding and ranking contexts too). */
  lora: string[];
  /** The draft model of speculative decoding, if the load has one. */
  draft?: DraftResources | undefined;
  /** Saved prompt prefixes of this load (SERVICE_CACHE_DIR), unless turned off. */
  prefixCache?: PrefixCache | undefined;
}

/** The loaded model, its slots and the contexts made from it. */
export class LoadedModel {
  readonly llama: Llama;
  readonly model: LlamaModel;
  readonly context: LlamaContext;
  readonly slots: Slot[];
  readonly decodeLoop: DecodeLoop;
  readonly modelFile: string;
  readonly lora: string[];
  readonly draft: DraftResources | undefined;
  readonly prefixCache: PrefixCache | undefined;
  /** Number of tokens in the model's vocabulary (ids are below it); 0 when the file lists none. */
  readonly vocabularySize: number;
  /** Changes the threads while jobs run, when SERVICE_THREADS is not set. */
  private governor: ThreadGovernor | undefined;
  private useCounter = 0;

  constructor(
    parts: ModelParts,
    private readonly io: ChildIo,
  ) {
    this.llama = parts.llama;
    this.model = parts.model;
    this.context = parts.context;
    this.slots = parts.slots;
    this.decodeLoop = parts.decodeLoop;
    this.modelFile = parts.modelFile;
    this.lora = parts.lora;
    this.draft = parts.draft;
    this.prefixCache = parts.prefixCache;
    const tokens = (parts.model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
    this.vocabularySize = Array.isArray(tokens) ? tokens.length : 0;
  }

  /** Threads chosen at load follow the load while jobs run (runner/threads.ts): the contexts change between two decodes. */
  governThreads(usable: number, threads: number): void {
    const contexts = [this.context, this.draft?.context].filter((c) => c !== undefined);
    this.governor = new ThreadGovernor({
      usable,
      threads,
      active: () => this.slots.some((slot) => slot.busy),
      apply: async (n) => {
        for (const context of contexts)
          await withLock([context, "context"], () => (context as unknown as { _ctx: { setThreads(n: number): void } })._ctx.setThreads(n));
      },
      log: (msg, data) => this.io.log("info", msg, data),
    });
  }

  /** Stops changing the threads (the model is about to unload). */
  stopGoverning(): void {
    this.governor?.stop();
    this.governor = undefined;
  }

  /**
   * Marks busy the free slot whose evaluated tokens share the longest prefix with `tokens`, and
   * restores into it a saved prefix longer than what it holds; undefined when every slot is busy.
   */
  async takeSlot(tokens: readonly Token[], signal: AbortSignal): Promise<{ slot: Slot; cached: number } | undefined> {
    const picked = this.pickSlot(tokens);
    if (!picked) return undefined;
    picked.slot.busy = true;
    this.governor?.wake();
    picked.slot.lastUsed = ++this.useCounter;
    if (this.prefixCache) {
      const sequence = picked.slot.sequence;
      picked.cached = await this.prefixCache.restore(sequence, tokens, picked.cached, signal).catch((err: unknown) => {
        this.io.log("warn", "saved prompt prefix not restored", { err: clientSafe(err, this.modelFile) });
        return commonPrefix(sequence.contextTokens, tokens);
      });
    }
    return picked;
  }

  /** The free slot whose evaluated tokens share the longest prefix with `tokens` (the prompt cache). */
  private pickSlot(tokens: readonly Token[]): { slot: Slot; cached: number } | undefined {
    let best: { slot: Slot; cached: number } | undefined;
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const cached = commonPrefix(slot.sequence.contextTokens, tokens);
      // A shared BOS alone is no reason to overwrite a slot's cache: compare such slots by age (LRU).
      const useful = (n: number) => (n > 1 ? n : 0);
      if (!best || useful(cached) > useful(best.cached) || (useful(cached) === useful(best.cached) && slot.lastUsed < best.slot.lastUsed))
        best = { slot, cached };
    }
    return best;
  }

  /** The grammar of a job's `format`; rejects a schema node-llama-cpp cannot express. */
  async grammarFor(spec: GrammarSpec | undefined): Promise<LlamaGrammar | undefined> {
    if (!spec) return undefined;
    if (spec.kind === "json") return jsonGrammar(this.llama);
    // The schema type is node-llama-cpp's GbnfJsonSchema; it rejects what it cannot express.
    return this.llama.createGrammarForJsonSchema(spec.schema as Parameters<Llama["createGrammarForJsonSchema"]>[0]);
  }

  /**
   * The model's embedding context. llama.cpp computes embeddings in a context created with
   * embeddings enabled, and node-llama-cpp cannot switch a generation context into that mode, so it
   * is a context of its own: made on the first embed job (models that are only chatted with never
   * pay for it), as long as the generation context, with the model's adapters, and disposed with
   * the model.
   */
  readonly embeddingContext = lazily(() =>
    this.model
      .createEmbeddingContext({ contextSize: this.context.contextSize, threads: this.context.currentThreads })
      .then((ectx) => this.withAdapters(ectx, "an embedding context")),
  );

  /** The model's ranking context: as the embedding context, made on the first rerank job. */
  readonly rankingContext = lazily(() =>
    this.model
      .createRankingContext({ contextSize: this.context.contextSize, threads: this.context.currentThreads })
      .then((rctx) => this.withAdapters(rctx, "a ranking context")),
  );

  /**
   * node-llama-cpp takes LoRA adapters only as a `createContext` option, and its embedding and
   * ranking contexts offer none; its (internal) context method that the option calls is used
   * instead, so that a model's adapters apply to its embeddings and scores too. node-llama-cpp is
   * pinned; if that method ever goes, the job fails loudly here rather than silently ignoring the
   * adapter.
   */
  private async withAdapters<T extends LlamaEmbeddingContext | LlamaRankingContext>(ctx: T, what: string): Promise<T> {
    if (this.lora.length === 0) return ctx;
    const inner = (ctx as unknown as { _llamaContext?: { _setLoras?: (l: Array<{ filePath: string }>) => Promise<void> } })._llamaContext;
    if (typeof inner?._setLoras !== "function") throw new Error(`this node-llama-cpp cannot apply LoRA adapters to ${what}`);
    await inner._setLoras(this.lora.map((filePath) => ({ filePath })));
    return ctx;
  }

  /** Saves what the slots evaluated (it outlives the load: prefix-cache.ts), then frees everything. */
  async dispose(): Promise<void> {
    for (const slot of this.slots) await this.prefixCache?.save(slot.sequence);
    await this.context.dispose().catch(() => undefined);
    await this.model.dispose().catch(() => undefined);
    await this.draft?.context.dispose().catch(() => undefined);
    await this.draft?.model.dispose().catch(() => undefined);
    await this.llama.dispose().catch(() => undefined);
  }
}

/** Whether an error is the engine running out of memory: node-llama-cpp's own error, or llama.cpp's words for it. */
export function outOfMemory(err: unknown): boolean {
  return err instanceof InsufficientMemoryError || /out of memory|insufficient memory/i.test(String(err));
}

/** A promise made on the first call and kept; a rejected one (out of memory) is made again by the next call. */
function lazily<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    if (!made) {
      const promise = make();
      made = promise;
      promise.catch(() => {
        if (made === promise) made = undefined;
      });
    }
    return made;
  };
}
