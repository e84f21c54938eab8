/**
 * The engine's entries that run no completion: embeddings (`/api/embed`, `/api/embeddings`,
 * `/v1/embeddings`), reranking (`/v1/rerank`), and the model's tokenizer (`/api/tokenize`,
 * `/api/detokenize`). Each holds a slot of the model for its one job.
 */
import { BadRequestError } from "../errors.js";
import { isReranker } from "../gguf/rerank.js";
import type { EmbedResult, RankResult } from "../runner/types.js";
import { ggufOf } from "../store/model-info.js";
import type { Services } from "./services.js";
import { requireEmbedding, withLease, type Target } from "./target.js";

/** Raw embedding vectors of `inputs` (one job; the runner evaluates them in turn). */
export async function runEmbed(
  services: Services,
  signal: AbortSignal,
  target: Target,
  inputs: string[],
  truncate: boolean,
  dimensions?: number,
): Promise<{ result: EmbedResult; loadNs: number }> {
  // The load form (no input) loads any model, as Ollama's does.
  if (inputs.length > 0) await requireEmbedding(services, target);
  return withLease(services, signal, target, async (lease) => {
    const length = lease.runner.info.embeddingLength;
    if (dimensions !== undefined && dimensions > length) throw new BadRequestError(`dimensions must be between 1 and ${length}`);
    const result = inputs.length === 0 ? { embeddings: [], promptTokens: 0 } : await lease.runner.embed({ inputs, truncate }, signal);
    return { result, loadNs: lease.loadNs };
  });
}

/** Keeps the first `dimensions` components (when given) and scales the vector to unit length. */
export function normalize(vector: readonly number[], dimensions?: number): number[] {
  const v = dimensions === undefined ? vector : vector.slice(0, dimensions);
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  return norm === 0 ? [...v] : v.map((x) => x / norm);
}

/**
 * Scores each document's relevance to the query. Whether the model is a reranker is decided from
 * its GGUF header before any load: a chat model is never loaded to be refused. An unreadable header
 * is left to the load, which reports it as the contract's corrupt-model 500.
 */
export async function runRank(services: Services, signal: AbortSignal, target: Target, query: string, documents: string[]): Promise<RankResult> {
  const gguf = await ggufOf(services.store, target.model.digest).catch(() => undefined);
  if (gguf && !isReranker(gguf)) throw new BadRequestError(`model '${target.name}' does not support reranking`);
  return withLease(services, signal, target, (lease) => lease.runner.rank({ query, documents }, signal));
}

/** Tokens of `content` by the model's own tokenizer (the model is loaded, as llama-server has it). */
export function tokenize(
  services: Services,
  signal: AbortSignal,
  target: Target,
  content: string,
  addSpecial: boolean,
  parseSpecial: boolean,
): Promise<Uint32Array> {
  return withLease(services, signal, target, (lease) => lease.runner.tokenize(content, signal, addSpecial, parseSpecial));
}

/** The text of `tokens`, special tokens written out. */
export function detokenize(services: Services, signal: AbortSignal, target: Target, tokens: number[]): Promise<string> {
  return withLease(services, signal, target, (lease) => lease.runner.detokenize(tokens, signal));
}
