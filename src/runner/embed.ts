/**
 * Embedding jobs in the runner child (imported only by child.ts).
 *
 * llama.cpp computes embeddings in a context created with embeddings enabled, and node-llama-cpp
 * cannot switch a generation context into that mode, so each model gets its own
 * `LlamaEmbeddingContext`, created on the first embed request (models that are only chatted with
 * never pay for it) with the same context length as the generation context, and disposed with the
 * model when the runner unloads. Vectors are returned raw; the daemon normalizes them.
 */
import type { LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import type { JobRuntime } from "./chat.js";
import type { EmbedJob } from "./protocol.js";

const contexts = new WeakMap<LlamaModel, Promise<LlamaEmbeddingContext>>();

function embeddingContext(model: LlamaModel, contextSize: number, threads: number): Promise<LlamaEmbeddingContext> {
  let ctx = contexts.get(model);
  if (!ctx) {
    ctx = model.createEmbeddingContext({ contextSize, threads });
    // A failed creation (out of memory) is retried by the next request instead of being cached.
    ctx.catch(() => contexts.delete(model));
    contexts.set(model, ctx);
  }
  return ctx;
}

/** Runs one embed job and answers with one `embedded` or `failed` message. */
export async function runEmbed(rt: JobRuntime, id: number, job: EmbedJob): Promise<void> {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  const abort = new AbortController();
  rt.jobs.set(id, abort);
  try {
    const { model, context } = l;
    // node-llama-cpp's embedding context takes at most contextSize-1 tokens.
    const contextSize = context.contextSize;
    const limit = contextSize - 1;
    const bos = model.tokens.bos;
    const withBos = bos !== null && model.tokens.shouldPrependBosToken;
    const inputs: Token[][] = [];
    for (const text of job.inputs) {
      let tokens = [...(withBos && bos !== null ? [bos] : []), ...model.tokenize(text, false)];
      if (tokens.length > limit) {
        if (!job.truncate) return rt.send({ type: "failed", id, kind: "invalid", message: `input length exceeds maximum context length (${tokens.length} tokens > ${limit})` });
        tokens = tokens.slice(0, limit); // Ollama keeps the start of an input that is too long
      }
      inputs.push(tokens);
    }
    const ectx = await embeddingContext(model, contextSize, context.currentThreads);
    const embeddings: number[][] = [];
    let promptTokens = 0;
    for (const tokens of inputs) {
      if (abort.signal.aborted) return rt.send({ type: "failed", id, kind: "other", message: "cancelled" });
      const vector = tokens.length === 0 ? [] : [...(await ectx.getEmbeddingFor(tokens)).vector];
      embeddings.push(vector.length === 0 ? new Array<number>(model.embeddingVectorSize).fill(0) : vector);
      promptTokens += tokens.length;
    }
    rt.send({ type: "embedded", id, result: { embeddings, promptTokens } });
  } catch (err) {
    const oom = /out of memory|insufficient memory/i.test(String(err));
    rt.log("error", "embedding failed", { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
    rt.send({ type: "failed", id, kind: oom ? "memory" : "other", message: oom ? "out of memory" : rt.clientSafe(err, l.modelFile) });
  } finally {
    rt.jobs.delete(id);
  }
}
