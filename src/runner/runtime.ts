/**
 * The shapes the runner child's job modules share (the loaded model, its slots, the runtime a job
 * gets). Declared here so that child.ts imports chat.ts and embed.ts, and they import only this file.
 */
import type { Llama, LlamaCompletion, LlamaContext, LlamaContextSequence, LlamaGrammar, LlamaModel, Token } from "node-llama-cpp";
import type { FromRunner, GrammarSpec } from "./protocol.js";
import type { DraftResources, SwitchablePredictor } from "./speculative.js";
import type { PauseSwitch } from "./flow.js";
import type { PrefixCache } from "./prefix-cache.js";

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

/** The model this runner has loaded. */
export interface Loaded {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  slots: Slot[];
  modelFile: string;
  /** LoRA adapter files applied to the contexts (the embedding and ranking contexts too). */
  lora: string[];
  /** The draft model of speculative decoding, if the load has one. */
  draft?: DraftResources | undefined;
  /** Saved prompt prefixes of this load (SERVICE_CACHE_DIR), unless turned off. */
  prefixCache?: PrefixCache | undefined;
}

/** What a job module (chat, embed) needs from the child. */
export interface JobRuntime {
  loaded(): Loaded | undefined;
  /** Picks the free slot with the longest cached prefix of `tokens`, marks it busy, and restores a longer saved prefix into it if there is one. */
  takeSlot(l: Loaded, tokens: readonly Token[], signal: AbortSignal): Promise<{ slot: Slot; cached: number } | undefined>;
  grammarFor(l: Loaded, spec: GrammarSpec | undefined): Promise<LlamaGrammar | undefined>;
  jobs: Map<number, AbortController>;
  /** The pause switches of generating jobs, by job id (`pause`/`resume` messages reach them). */
  pauses: Map<number, PauseSwitch>;
  send(msg: FromRunner): void;
  log(level: "debug" | "info" | "warn" | "error", msg: string, data?: Record<string, unknown>): void;
  clientSafe(err: unknown, modelFile?: string): string;
}
