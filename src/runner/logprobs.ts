/**
 * Token probabilities for a job that asks for logprobs (child-side only).
 *
 * node-llama-cpp computes them at sampling time (`evaluateWithMetadata` with `probabilities` or
 * `confidence`), but its LlamaCompletion and LlamaChat call the sequence's plain `evaluate()`.
 * For the length of one job, the slot's sequence gets an `evaluate` of its own that asks for the
 * metadata and records it, in sampling order; the tokens the generator then emits (without stop
 * triggers, function-call syntax or thoughts) are matched to those records in order.
 */
import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { TokenLogprob, TokenProbability } from "./types.js";

interface Sampled {
  token: Token;
  /** The tokens just before it: a token's text depends on them (SentencePiece's leading space). */
  before: Token[];
  probabilities?: Map<Token, number>;
  confidence?: number;
}

type Evaluate = LlamaContextSequence["evaluate"];

/** Tokens of context kept for detokenizing a token as it reads in place. */
const CONTEXT = 4;

export class LogprobRecorder {
  private readonly sampled: Sampled[] = [];
  private cursor = 0;
  /** The sequence's `evaluate` before this job (lmd's decode loop, runner/fast-evaluate.ts), put back by `restore`. */
  private readonly previous: Evaluate;

  /** @param top alternatives per token; 0 asks only for each chosen token's probability (cheaper). */
  constructor(
    private readonly sequence: LlamaContextSequence,
    private readonly model: LlamaModel,
    private readonly top: number,
  ) {
    const sampled = this.sampled;
    const metadata = top > 0 ? ({ probabilities: true } as const) : ({ confidence: true } as const);
    const evaluate = async function* (this: LlamaContextSequence, tokens: Token[], options?: Parameters<Evaluate>[1]) {
      const iterator = this.evaluateWithMetadata(tokens, metadata, options);
      let input: void | Token | Token[] = undefined;
      let before = tokens.slice(-CONTEXT);
      try {
        while (true) {
          const { value, done } = await iterator.next(input);
          if (done) return;
          sampled.push({ ...value, before });
          before = [...before, value.token].slice(-CONTEXT);
          input = yield value.token;
        }
      } finally {
        await iterator.return();
      }
    };
    // An own property shadows the prototype's method (and the decode loop's own one) until `restore`.
    this.previous = sequence.evaluate;
    sequence.evaluate = evaluate as Evaluate;
  }

  restore(): void {
    this.sequence.evaluate = this.previous;
  }

  /** The logprobs of the next emitted `tokens`. */
  take(tokens: readonly Token[]): TokenLogprob[] {
    const out: TokenLogprob[] = [];
    for (const token of tokens) {
      let i = this.cursor;
      while (i < this.sampled.length && this.sampled[i]!.token !== token) i++;
      const record = this.sampled[i];
      if (!record) continue; // not a sampled token (never seen in practice): nothing to report
      this.cursor = i + 1;
      const p = record.probabilities?.get(token) ?? record.confidence ?? 0;
      out.push({ ...this.probability(token, p, record.before), ...(this.top > 0 ? { top: this.alternatives(record) } : {}) });
    }
    return out;
  }

  private alternatives(record: Sampled): TokenProbability[] {
    const top: TokenProbability[] = [];
    // The map is sorted from the most to the least likely token.
    for (const [token, p] of record.probabilities ?? []) {
      if (top.length >= this.top) break;
      top.push(this.probability(token, p, record.before));
    }
    return top;
  }

  private probability(token: Token, p: number, before: Token[]): TokenProbability {
    const text = this.model.detokenize([token], true, before);
    // JSON has no -Infinity: an impossible token (never a sampled one) gets the lowest finite value.
    return { token: text, logprob: p > 0 ? Math.log(p) : -Number.MAX_VALUE, bytes: [...Buffer.from(text, "utf8")] };
  }
}
