/**
 * The parts of node-llama-cpp 3.22.1 that lmd's decode loop (runner/decode-loop.ts) and its
 * evaluation (runner/fast-evaluate.ts) use beyond its public API: a context's addon and a sequence's
 * position, tokens and sampler setup. The version is pinned; bench/ times the addon calls directly.
 */
import type { LlamaContextSequence, Token, TokenMeter } from "node-llama-cpp";
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
  /** Set by the patched node-llama-cpp when a sequence erases tokens (the decode loop then waits a turn). */
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
