/**
 * Rerank jobs in the runner child: node-llama-cpp's ranking context (model.ts), which evaluates
 * `[BOS] query [EOS] [SEP] document [EOS]` (or the model's `chat_template.rerank`) through the
 * classification head and returns a sigmoid probability per document.
 */
import type { RankJob } from "../types.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** Runs one rank job: one `ranked` or `failed` message. */
export function runRank(host: JobHost, id: number, job: RankJob): Promise<void> {
  return withJob(host, id, { what: "reranking" }, (j) => rank(j, job));
}

async function rank(j: Job, job: RankJob): Promise<void> {
  if (!j.model.model.fileInsights.supportsRanking) throw new JobFailure("invalid", "the model does not support reranking");
  const rctx = await j.model.rankingContext();
  const limit = rctx.contextSize - 1;
  let promptTokens = 0;
  for (const document of job.documents) {
    const length = rctx.calculateInputLength(job.query, document);
    if (length > limit) throw new JobFailure("invalid", `input length exceeds maximum context length (${length} tokens > ${limit})`);
    promptTokens += length;
  }
  // One document at a time (rankAll would queue them all at once) so a cancelled request stops early.
  const scores: number[] = [];
  for (const document of job.documents) {
    if (j.signal.aborted) throw new JobFailure("other", "cancelled");
    scores.push(await rctx.rank(job.query, document));
  }
  j.send({ type: "ranked", id: j.id, result: { scores, promptTokens } });
}
