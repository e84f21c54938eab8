/**
 * Tokenize and detokenize jobs in the runner child: the tokens of already-rendered text (for the
 * parent's history truncation and /api/tokenize), and the text of tokens (/api/detokenize).
 */
import type { Token } from "node-llama-cpp";
import type { FromRunner } from "../protocol.js";
import { tokenizeAsync } from "../tokens.js";
import { tokenMessages } from "../token-parts.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** A tokenize job's text and llama-server's flags. */
export interface TokenizeRequest {
  text: string;
  addSpecial: boolean;
  parseSpecial: boolean;
}

/**
 * Answers one `tokenize` job. The text is tokenized in chunks (runner/tokens.ts) and a `cancel`
 * stops it between two; the tokens go back in parts of packed 32-bit integers (runner/token-parts.ts).
 */
export function runTokenize(host: JobHost, id: number, request: TokenizeRequest): Promise<void> {
  return withJob(host, id, { what: "tokenizing", cancelled }, (j) => tokenize(j, request));
}

function cancelled(id: number): FromRunner {
  return { type: "failed", id, kind: "other", message: "cancelled" };
}

async function tokenize(j: Job, { text, addSpecial, parseSpecial }: TokenizeRequest): Promise<void> {
  const { model } = j.model;
  const tokens = await tokenizeAsync(model, text, parseSpecial, undefined, j.signal);
  // llama-server's add_special: BOS/EOS exactly where the vocabulary's add_bos/add_eos flags ask.
  const { bos, eos, shouldPrependBosToken, shouldAppendEosToken } = model.tokens;
  if (addSpecial && shouldPrependBosToken && bos !== null) tokens.unshift(bos);
  if (addSpecial && shouldAppendEosToken && eos !== null) tokens.push(eos);
  for (const msg of tokenMessages(j.id, tokens)) j.send(msg);
}

/** Answers one `detokenize` job with `rendered`: special tokens written out, as llama-server's /detokenize; synchronous. */
export function runDetokenize(host: JobHost, id: number, tokens: number[]): Promise<void> {
  return withJob(host, id, { what: "detokenizing" }, (j) => detokenize(j, tokens));
}

function detokenize(j: Job, tokens: number[]): void {
  // llama.cpp reads token attributes with .at(): an id outside the vocabulary would abort the runner.
  const size = j.model.vocabularySize;
  const bad = tokens.find((t) => t >= size);
  if (bad !== undefined) throw new JobFailure("invalid", `token ${bad} is not in the model's vocabulary (size ${size})`);
  j.send({ type: "rendered", id: j.id, text: j.model.model.detokenize(tokens as Token[], true) });
}
