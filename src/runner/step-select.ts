/**
 * Which waiting tokens a decode step of runner/decode-loop.ts takes, apart from the loop's state:
 * the requests it holds, the batch size, the prompt budget and whether the last step deferred its
 * generations' tokens.
 */
import type { Token } from "node-llama-cpp";
import type { SequenceInternals } from "./llama-internals.js";
import { promptPiece, type PrefillBudget } from "./prefill-budget.js";

/** One sequence's tokens waiting for a step; `sample` is the sampling of the last one's logits. */
export interface Request {
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
export interface Item {
  request: Request;
  count: number;
  logit?: number;
  sampled?: Promise<number>;
}

/** A step's tokens, and whether it left its generations' single tokens for the next step. */
export interface Selection {
  items: Item[];
  deferred: boolean;
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
export function selectStep(queue: readonly Request[], batchSize: number, budget: Pick<PrefillBudget, "tokens">, deferredBefore: boolean): Selection {
  const ordered = [...queue.filter((r) => r.tokens.length - r.done === 1), ...queue.filter((r) => r.tokens.length - r.done !== 1)];
  const items: Item[] = [];
  const generating = ordered[0] !== undefined && ordered[0].tokens.length - ordered[0].done === 1;
  let room = batchSize;
  // Singles deferred by the last step go alone now: their gap spans one prompt share, not two.
  let promptRoom = deferredBefore && generating ? 0 : budget.tokens(batchSize, generating);
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
  if (deferredBefore || several.length === 0 || several.length === items.length || continues) return { items, deferred: false };
  return { items: several, deferred: true };
}
