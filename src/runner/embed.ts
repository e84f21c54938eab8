/**
 * Embedding jobs in the runner child (imported only by child.ts).
 *
 * llama.cpp computes embeddings in a context created with embeddings enabled, and node-llama-cpp
 * cannot switch a generation context into that mode, so each model gets its own
 * `LlamaEmbeddingContext`, created on the first embed request (models that are only chatted with
 * never pay for it) with the same context length as the generation context, and disposed with the
 * model when the runner unloads. Vectors are returned raw; the daemon normalizes them.
 */
import { LlamaVocabularyType, type LlamaEmbeddingContext, type LlamaModel, type Token } from "node-llama-cpp";
import type { JobRuntime } from "./runtime.js";
import type { EmbedJob } from "./protocol.js";

const contexts = new WeakMap<LlamaModel, Promise<LlamaEmbeddingContext>>();

function embeddingContext(model: LlamaModel, contextSize: number, threads: number, lora: string[]): Promise<LlamaEmbeddingContext> {
  let ctx = contexts.get(model);
  if (!ctx) {
    ctx = model.createEmbeddingContext({ contextSize, threads }).then(async (ectx) => {
      if (lora.length > 0) await applyLora(ectx, lora);
      return ectx;
    });
    // A failed creation (out of memory) is retried by the next request instead of being cached.
    ctx.catch(() => contexts.delete(model));
    contexts.set(model, ctx);
  }
  return ctx;
}

/**
 * node-llama-cpp takes LoRA adapters only as a `createContext` option, and its embedding context
 * offers none; its (internal) context method that the option calls is used instead, so that a
 * model's adapters apply to its embeddings too. node-llama-cpp is pinned (3.22.1); if that method
 * ever goes, embedding fails loudly here rather than silently ignoring the adapter.
 */
async function applyLora(ectx: LlamaEmbeddingContext, lora: string[]): Promise<void> {
  const inner = (ectx as unknown as { _llamaContext?: { _setLoras?: (l: Array<{ filePath: string }>) => Promise<void> } })._llamaContext;
  if (typeof inner?._setLoras !== "function") throw new Error("this node-llama-cpp cannot apply LoRA adapters to an embedding context");
  await inner._setLoras(lora.map((filePath) => ({ filePath })));
}

/**
 * The token node-llama-cpp's embedding context appends to every input (SEP for a WordPiece/BERT
 * vocabulary, EOS where the model asks for it): appended here so that it is counted and truncation
 * leaves room for it.
 */
function endToken(model: LlamaModel): Token | null {
  if (model.vocabularyType === LlamaVocabularyType.wpm) return model.tokens.sep;
  if (model.vocabularyType === LlamaVocabularyType.ugm || model.tokens.shouldAppendEosToken) return model.tokens.eos;
  return null;
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
    const withBos = bos !== null && (model.tokens.shouldPrependBosToken || model.vocabularyType === LlamaVocabularyType.wpm);
    const end = endToken(model);
    const inputs: Token[][] = [];
    for (const text of job.inputs) {
      let tokens = [...(withBos && bos !== null ? [bos] : []), ...model.tokenize(text, false)];
      const length = tokens.length + (end === null ? 0 : 1);
      if (length > limit) {
        if (!job.truncate) return rt.send({ type: "failed", id, kind: "invalid", message: `input length exceeds maximum context length (${length} tokens > ${limit})` });
        tokens = tokens.slice(0, limit - (end === null ? 0 : 1)); // Ollama keeps the start of an input that is too long
      }
      inputs.push(end === null ? tokens : [...tokens, end]);
    }
    const ectx = await embeddingContext(model, contextSize, context.currentThreads, l.lora);
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
