/**
 * Speculative decoding in the runner: each slot's sequence gets one predictor that proposes the
 * next tokens, which the target model then checks in a single batch (node-llama-cpp accepts the
 * longest prefix the target itself would have sampled, so greedy output is unchanged).
 *
 * - A draft model (Modelfile `DRAFT <model>`): a small model with the same vocabulary drafts the
 *   next tokens on a sequence of its own (ExactDraftPredictor below).
 * - Prompt lookup (`PARAMETER prompt_lookup true`): the last generated tokens are looked up in the
 *   prompt and what followed them there is proposed (InputLookupTokenPredictor); no second model.
 *
 * A sequence's predictor is fixed when the sequence is made, so a request that turns speculation
 * off (`options.speculative: false`) switches this wrapper to "off" for its job instead.
 */
import type { SpeculationLoad } from "./protocol.js";
import {
  InputLookupTokenPredictor,
  TokenPredictor,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";

export type SpeculationMode = "off" | "lookup" | "draft";

type ResetParams = Parameters<TokenPredictor["reset"]>[0];

/** Delegates to the predictor chosen for the current job; proposes nothing when off. */
export class SwitchablePredictor extends TokenPredictor {
  /** Set by the job before it generates; read at the predictor's reset (start of a generation). */
  mode: SpeculationMode = "off";
  private active: TokenPredictor | undefined;

  constructor(
    private readonly lookup: InputLookupTokenPredictor | undefined,
    private readonly draft: ExactDraftPredictor | undefined,
  ) {
    super();
  }

  /** The best mode this slot offers: the draft model, else prompt lookup, else nothing. */
  get available(): SpeculationMode {
    return this.draft ? "draft" : this.lookup ? "lookup" : "off";
  }

  reset(params: ResetParams): Promise<void> | void {
    this.active = this.mode === "draft" ? this.draft : this.mode === "lookup" ? this.lookup : undefined;
    return this.active?.reset(params);
  }

  pushTokens(tokens: Token[]): void {
    this.active?.pushTokens(tokens);
  }

  predictTokens(): Promise<Token[]> | Token[] {
    return this.active?.predictTokens() ?? [];
  }

  override stop(untilPredictionsExhausted?: boolean): Promise<void> | void {
    return this.active?.stop(untilPredictionsExhausted);
  }

  override updateInputTokens(tokens: Token[]): void {
    this.lookup?.updateInputTokens(tokens);
  }

  override async dispose(): Promise<void> {
    await this.lookup?.dispose();
    await this.draft?.dispose();
  }
}


/** The draft model and its context, owned by the runner next to the target's. */
export interface DraftResources {
  model: LlamaModel;
  context: LlamaContext;
}

type EvaluateOptions = ResetParams["evaluateOptions"];

/**
 * Drafts with a second model, synchronously and exactly: before each draft, the draft sequence is
 * brought to the target's accepted tokens (their common prefix kept, the rest erased and
 * evaluated), then up to `maxTokens` tokens are drafted greedily, stopping at the first whose
 * probability is under `minConfidence` (llama.cpp's draft loop, --draft-max / --draft-p-min).
 *
 * node-llama-cpp's DraftSequenceTokenPredictor drafts in the background while the target decodes;
 * in a runner with one libuv thread nothing runs in the background, and its bookkeeping of the
 * draft state loses a token whenever a whole draft is accepted (the state then drifts and the
 * drafts are refuted), so lmd keeps the draft state itself.
 */
export class ExactDraftPredictor extends TokenPredictor {
  private tokens: Token[] = [];
  private options: EvaluateOptions = {};

  constructor(
    private readonly draft: LlamaContextSequence,
    private readonly maxTokens: number,
    private readonly minConfidence: number,
  ) {
    super();
  }

  reset({ stateTokens, evaluateOptions }: ResetParams): void {
    this.tokens = stateTokens.slice();
    this.options = evaluateOptions;
  }

  pushTokens(tokens: Token[]): void {
    for (const t of tokens) this.tokens.push(t);
  }

  async predictTokens(): Promise<Token[]> {
    const limit = this.draft.context.contextSize - 1;
    const state = this.tokens.length > limit ? this.tokens.slice(-limit) : this.tokens;
    if (state.length === 0) return [];
    // Keep what the draft already evaluated of `state` (all but its last token), evaluate the rest.
    await this.draft.adaptStateToTokens(state.slice(0, -1), false);
    const pending = state.slice(this.draft.nextTokenIndex);
    const out: Token[] = [];
    const iterator = this.draft.evaluateWithMetadata(pending, { confidence: true }, {
      temperature: 0,
      ...(this.options.contextShift ? { contextShift: this.options.contextShift } : {}),
    });
    try {
      for await (const { token, confidence } of iterator) {
        if (confidence !== undefined && confidence < this.minConfidence) break;
        out.push(token);
        if (out.length >= this.maxTokens || out.length + state.length >= limit) break;
      }
    } finally {
      await iterator.return(undefined);
    }
    return out;
  }

  override stop(): void {
    // Nothing runs in the background.
  }
}

/** Draft tokens at most per step: enough to pay for a verification batch, few enough to waste little. */
const DRAFT_MAX_TOKENS = 12;
/** Drafting stops at a token less likely than this (node-llama-cpp's default; llama.cpp's is 0.75). */
const DRAFT_P_MIN = 0.6;

/** One predictor per slot (`sequences` of them), sharing the draft context when there is one. */
export function slotPredictors(spec: SpeculationLoad, sequences: number, draft: DraftResources | undefined): SwitchablePredictor[] {
  const out: SwitchablePredictor[] = [];
  for (let i = 0; i < sequences; i++) {
    const draftSequence: LlamaContextSequence | undefined = draft?.context.getSequence();
    out.push(new SwitchablePredictor(
      spec.lookup ? new InputLookupTokenPredictor() : undefined,
      draftSequence ? new ExactDraftPredictor(draftSequence, DRAFT_MAX_TOKENS, spec.minConfidence ?? DRAFT_P_MIN) : undefined,
    ));
  }
  return out;
}

/** Counts of a sequence's checked predictions, to report per job (deltas of node-llama-cpp's counters). */
export function predictionCounts(sequence: LlamaContextSequence): { validated: number; refuted: number } {
  const p = sequence.tokenPredictions;
  return { validated: p.validated, refuted: p.refuted };
}

/** Draft tokens a job had checked, and how many the target accepted. */
export interface DraftStats {
  proposed: number;
  accepted: number;
}

/**
 * Chooses the job's mode on the slot's predictor (`speculative: false` turns it off) and returns
 * a function that reports what the job's speculation did (undefined when none ran).
 */
export function beginSpeculation(sequence: LlamaContextSequence, predictor: SwitchablePredictor | undefined, speculative: boolean | undefined): () => DraftStats | undefined {
  if (!predictor) return () => undefined;
  predictor.mode = speculative === false ? "off" : predictor.available;
  if (predictor.mode === "off") return () => undefined;
  const before = predictionCounts(sequence);
  return () => {
    const after = predictionCounts(sequence);
    const accepted = after.validated - before.validated;
    return { proposed: accepted + after.refuted - before.refuted, accepted };
  };
}
