/**
 * The vocabulary of lmd's decode loop (runner/decode-loop.ts): the node-llama-cpp internals it
 * drives (node-llama-cpp 3.22.1, pinned), a sequence's request for a step and its part in one.
 */
import type { LlamaContextSequence, Token, TokenMeter } from "node-llama-cpp";
import type { Provisional } from "./decode-ahead.js";
import type { AddonSampler } from "./sampler-config.js";

export type Evaluate = LlamaContextSequence["evaluate"];
export type EvaluateOptions = NonNullable<Parameters<Evaluate>[1]>;

/** The addon calls the loop makes (node-llama-cpp's AddonContext and AddonSampler); bench/ times them directly. */
export interface AddonContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenSequenceIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: AddonSampler): Promise<number>;
  removeTokenCellsFromSequence(sequenceId: number, startPos: number, endPos: number): boolean;
}
export interface ContextInternals {
  _ctx: AddonContext;
  /** Set by the patched node-llama-cpp when a sequence erases tokens (see step). */
  _yieldBeforeNextBatch?: boolean;
  batchSize: number;
  contextSize: number;
}
export interface SequenceInternals {
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
export interface Request {
  sequence: SequenceInternals;
  tokens: Token[];
  /** How many of `tokens` earlier steps have decoded (a prompt longer than the batch takes several). */
  done: number;
  /** Samples the token after the last one from the batch's logits at this index. */
  sample: (logit: number) => Promise<number>;
  /** Whether the generation goes on after `token` as far as the loop can tell (see decode-ahead.ts). */
  ahead?: (token: number) => boolean;
  /** Set while the request is a token decoded ahead that its generation has not asked for yet. */
  provisional?: Provisional;
  resolve(token: number): void;
  reject(err: unknown): void;
}

/** A request's part in one step: `count` of its tokens; `logit` where its last token is among them. */
export interface Item {
  request: Request;
  count: number;
  logit?: number;
  sampled?: Promise<number>;
  /** A token decoded ahead and dropped: its cell left the KV cache again. */
  dropped?: boolean;
}
