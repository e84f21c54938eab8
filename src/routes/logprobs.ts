/**
 * Logprobs on the wire: the runner reports each generated token's log probability (and the most
 * likely alternatives); these write them in each API's shape. The numbers are the runner's, so the
 * same request and seed give the same numbers on every surface.
 */
import type { Logprob } from "../api/types.js";
import type { TokenLogprob } from "../chat/types.js";

/** Ollama's request fields → the runner's setting: alternatives per token, or undefined (off). */
export function ollamaLogprobs(body: { logprobs?: boolean; top_logprobs?: number }): number | undefined {
  return body.logprobs ? (body.top_logprobs ?? 0) : undefined;
}

/** Ollama's shape (its api.Logprob): `top_logprobs` only when alternatives were asked for. */
export function toOllama(lps: readonly TokenLogprob[]): Logprob[] {
  return lps.map(({ top, ...lp }) => (top ? { ...lp, top_logprobs: top } : lp));
}

/** OpenAI chat's `logprobs.content` items: `top_logprobs` is always there (empty without alternatives). */
export function toOpenAIContent(lps: readonly TokenLogprob[]): Required<Logprob>[] {
  return lps.map(({ top, ...lp }) => ({ ...lp, top_logprobs: top ?? [] }));
}

/**
 * `/v1/completions`' logprobs: OpenAI's legacy arrays (`tokens`, `token_logprobs`, `top_logprobs`
 * as token → logprob maps, `text_offset` into the answer), plus the `content` list that
 * llama-server and Ollama send there, so clients of either find theirs.
 */
export function toLegacy(lps: readonly TokenLogprob[], offset: number): Record<string, unknown> {
  const text_offset: number[] = [];
  let at = offset;
  for (const lp of lps) {
    text_offset.push(at);
    at += lp.token.length;
  }
  return {
    tokens: lps.map((lp) => lp.token),
    token_logprobs: lps.map((lp) => lp.logprob),
    top_logprobs: lps.map((lp) => Object.fromEntries((lp.top ?? []).map((a) => [a.token, a.logprob]))),
    text_offset,
    content: toOpenAIContent(lps),
  };
}
