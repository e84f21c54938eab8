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
 *
 * Speculation is adaptive (DraftSchedule), so that a draft the target keeps refusing costs little:
 *
 * - A consultation whose first token is refused (or, for a draft model, that proposes nothing:
 *   no token reached `draft_p_min`, yet the draft model was evaluated) backs off: the next
 *   `backoff` steps decode without consulting the predictor at all, and `backoff` doubles with
 *   each refusal in a row (1, 2, 4, … up to MAX_BACKOFF). Any accepted token resets it to 0.
 *   A draft model skips its evaluation on those steps; when it drafts again, its sequence catches
 *   up on the skipped tokens in one batch.
 * - A draft is at most `limit` tokens: INITIAL_DRAFT at the start of a generation, doubled after a
 *   draft accepted whole (up to `draft_max`, DRAFT_MAX_TOKENS), cut to one more than was accepted
 *   after one accepted in part, and 1 after a refusal.
 *
 * - A draft model's refusal streak carries over to the slot's next generation: it starts with
 *   one-token drafts and the back-off where the last one left it (the first step is still
 *   consulted). A draft that the workload keeps refusing then costs 2 consultations per 64 tokens
 *   from the second request on; one accepted token starts the schedule afresh.
 *
 * With an unrelated draft that is 6 consultations in a slot's first 64-token generation (steps
 * 0, 2, 5, 10, 19, 36), each of 1 draft token after the first, instead of one per token, and 2
 * in each later one (steps 0 and 33); with a pair that agrees, drafts grow 4 → 8 → 12 and stay
 * there. An empty prompt-lookup result costs nothing (no model ran), so it does not back off; a
 * refused lookup does, within its generation only (whether a prompt repeats itself is a property
 * of that prompt).
 */
import type { SpeculationLoad } from "./types.js";
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

/** Tokens of the first draft of a generation: a good pair gains from the start (4 → 8 → 12), a bad one costs a few draft tokens. */
const INITIAL_DRAFT = 4;
/**
 * Longest back-off, in steps: a refused consultation costs about one target decode (the draft's
 * catch-up batch, one draft token, one more token to verify), so one per 32 steps keeps a draft
 * that never agrees within ~3 % of plain decoding, while a draft that starts agreeing again is
 * consulted within 32 tokens.
 */
const MAX_BACKOFF = 32;

/**
 * When to consult the predictor and how many tokens to ask for, from what the target did with
 * the previous proposals (the rule is in this file's header comment). One per generation.
 */
export class DraftSchedule {
  /** Tokens the next draft may propose. */
  limit: number;
  /** Steps left to decode without consulting the predictor. */
  private skip = 0;
  /** Steps to skip after the next refusal is doubled from this; 0 after an acceptance. */
  private backoff = 0;

  constructor(private readonly max: number) {
    this.limit = Math.min(max, INITIAL_DRAFT);
  }

  /** Whether to consult the predictor at this step (a step not consulted counts down the back-off). */
  consult(): boolean {
    if (this.skip === 0) return true;
    this.skip -= 1;
    return false;
  }

  /** The target accepted the first `accepted` of `proposed` tokens (0 of 0: nothing was proposed). */
  record(proposed: number, accepted: number): void {
    if (accepted === 0) {
      this.backoff = Math.min(MAX_BACKOFF, Math.max(1, this.backoff * 2));
      this.skip = this.backoff;
      this.limit = 1;
      return;
    }
    this.backoff = 0;
    this.limit = Math.min(this.max, accepted === proposed ? this.limit * 2 : accepted + 1);
  }

  /** The schedule of the next generation with the same draft model: a refusal streak carries over (one-token drafts, the back-off where it was). */
  next(): DraftSchedule {
    const s = new DraftSchedule(this.max);
    if (this.backoff > 0) {
      s.backoff = this.backoff;
      s.limit = 1;
    }
    return s;
  }
}

/** Delegates to the predictor chosen for the current job, on a DraftSchedule; proposes nothing when off. */
export class SwitchablePredictor extends TokenPredictor {
  /** Set by the job before it generates; read at the predictor's reset (start of a generation). */
  mode: SpeculationMode = "off";
  /** Consultations and proposed tokens of the current generation (tests, diagnostics). */
  consulted = 0;
  private active: TokenPredictor | undefined;
  private schedule = new DraftSchedule(DRAFT_MAX_TOKENS);
  /** The schedule of the slot's last generation with the draft model, carried into its next. */
  private lastDraft: DraftSchedule | undefined;
  /** The last proposal, until the next consultation settles what the target did with it. */
  private proposal: Token[] | undefined;
  /** Tokens the target produced since that proposal. */
  private since: Token[] = [];

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
    this.schedule = this.mode === "draft" && this.lastDraft ? this.lastDraft.next() : new DraftSchedule(this.draft?.maxTokens ?? DRAFT_MAX_TOKENS);
    if (this.mode === "draft") this.lastDraft = this.schedule;
    this.proposal = undefined;
    this.since = [];
    this.consulted = 0;
    return this.active?.reset(params);
  }

  pushTokens(tokens: Token[]): void {
    this.active?.pushTokens(tokens);
    if (this.proposal) for (const t of tokens) this.since.push(t);
  }

  predictTokens(): Promise<Token[]> | Token[] {
    if (!this.active) return [];
    if (this.proposal) {
      let accepted = 0;
      while (accepted < this.proposal.length && this.since[accepted] === this.proposal[accepted]) accepted++;
      this.schedule.record(this.proposal.length, accepted);
      this.proposal = undefined;
      this.since = [];
    }
    if (!this.schedule.consult()) return [];
    this.consulted += 1;
    if (this.active === this.draft) return this.draft.predictTokens(this.schedule.limit).then((out) => this.proposed(out, true));
    const out = this.active.predictTokens();
    return out instanceof Promise ? out.then((o) => this.proposed(o, false)) : this.proposed(out, false);
  }

  /** Remembers a proposal (cut to the schedule's limit) to settle at the next consultation. */
  private proposed(out: Token[], emptyIsRefusal: boolean): Token[] {
    const cut = out.length > this.schedule.limit ? out.slice(0, this.schedule.limit) : out;
    // An empty lookup ran no model: nothing to learn, and nothing to back off from.
    if (cut.length > 0 || emptyIsRefusal) this.proposal = cut;
    return cut;
  }

  override stop(untilPredictionsExhausted?: boolean): Promise<void> | void {
    return this.active?.stop(untilPredictionsExhausted);
  }

  override updateInputTokens(tokens: Token[]): void {
    this.lookup?.updateInputTokens(tokens);
  }

  override async dispose(): Promise<void> {
    this.lookup?.dispose();
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
    readonly maxTokens: number,
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

  /** Drafts up to `maxTokens` tokens (fewer when the schedule asks for fewer). */
  async predictTokens(maxTokens = this.maxTokens): Promise<Token[]> {
    const limit = this.draft.context.contextSize - 1;
    const state = this.tokens.length > limit ? this.tokens.slice(-limit) : this.tokens;
    if (state.length === 0) return [];
    // Keep what the draft already evaluated of `state` (all but its last token), evaluate the rest.
    await this.draft.adaptStateToTokens(state.slice(0, -1), false);
    const pending = state.slice(this.draft.nextTokenIndex);
    const out: Token[] = [];
    // The confidence (a softmax over the vocabulary) only when draft_p_min needs it.
    const iterator = this.draft.evaluateWithMetadata(pending, { confidence: this.minConfidence > 0 }, {
      temperature: 0,
      ...(this.options.contextShift ? { contextShift: this.options.contextShift } : {}),
    });
    try {
      for await (const item of iterator) {
        const { token, confidence } = item as { token: Token; confidence?: number };
        if (confidence !== undefined && confidence < this.minConfidence) break;
        out.push(token);
        if (out.length >= maxTokens || out.length + state.length >= limit) break;
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
      draftSequence ? new ExactDraftPredictor(draftSequence, spec.maxTokens ?? DRAFT_MAX_TOKENS, spec.minConfidence ?? DRAFT_P_MIN) : undefined,
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
export function beginSpeculation(
  sequence: LlamaContextSequence,
  predictor: SwitchablePredictor | undefined,
  speculative: boolean | undefined,
): () => DraftStats | undefined {
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
