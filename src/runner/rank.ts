/**
 * Reranking jobs in the runner child (imported only by child.ts): node-llama-cpp's ranking
 * context (`model.createRankingContext()`), which evaluates `[BOS] query [EOS] [SEP] document
 * [EOS]` (or the model's `chat_template.rerank`) through the classification head and returns a
 * sigmoid probability per document. Like the embedding context it is created on the first rerank
 * request, with the generation context's length, and carries the model's LoRA adapters.
 */
import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import type { JobRuntime } from "./runtime.js";
import type { RankJob } from "./protocol.js";

const contexts = new WeakMap<LlamaModel, Promise<LlamaRankingContext>>();

function rankingContext(model: LlamaModel, contextSize: number, threads: number, lora: string[]): Promise<LlamaRankingContext> {
  let ctx = contexts.get(model);
  if (!ctx) {
    ctx = model.createRankingContext({ contextSize, threads }).then(async (rctx) => {
      if (lora.length > 0) await applyLora(rctx, lora);
      return rctx;
    });
    ctx.catch(() => contexts.delete(model)); // retried by the next request
    contexts.set(model, ctx);
  }
  return ctx;
}

/** As embed.ts: node-llama-cpp's ranking context takes no `lora` option, its inner context does. */
async function applyLora(rctx: LlamaRankingContext, lora: string[]): Promise<void> {
  const inner = (rctx as unknown as { _llamaContext?: { _setLoras?: (l: Array<{ filePath: string }>) => Promise<void> } })._llamaContext;
  if (typeof inner?._setLoras !== "function") throw new Error("this node-llama-cpp cannot apply LoRA adapters to a ranking context");
  await inner._setLoras(lora.map((filePath) => ({ filePath })));
}

/** Runs one rank job and answers with one `ranked` or `failed` message. */
export async function runRank(rt: JobRuntime, id: number, job: RankJob): Promise<void> {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  const abort = new AbortController();
  rt.jobs.set(id, abort);
  try {
    const { model, context } = l;
    if (!model.fileInsights.supportsRanking) return rt.send({ type: "failed", id, kind: "invalid", message: "the model does not support reranking" });
    const rctx = await rankingContext(model, context.contextSize, context.currentThreads, l.lora);
    const limit = rctx.contextSize - 1;
    let promptTokens = 0;
    for (const document of job.documents) {
      const length = rctx.calculateInputLength(job.query, document);
      if (length > limit) return rt.send({ type: "failed", id, kind: "invalid", message: `input length exceeds maximum context length (${length} tokens > ${limit})` });
      promptTokens += length;
    }
    // One document at a time (rankAll would queue them all at once) so a cancelled request stops early.
    const scores: number[] = [];
    for (const document of job.documents) {
      if (abort.signal.aborted) return rt.send({ type: "failed", id, kind: "other", message: "cancelled" });
      scores.push(await rctx.rank(job.query, document));
    }
    rt.send({ type: "ranked", id, result: { scores, promptTokens } });
  } catch (err) {
    const oom = /out of memory|insufficient memory/i.test(String(err));
    rt.log("error", "reranking failed", { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
    rt.send({ type: "failed", id, kind: oom ? "memory" : "other", message: oom ? "out of memory" : rt.clientSafe(err, l.modelFile) });
  } finally {
    rt.jobs.delete(id);
  }
}
