/**
 * Embed jobs in the runner child: each input tokenized (with the tokens the embedding context adds,
 * so that they are counted and truncation leaves room for them) and embedded in the loaded model's
 * embedding context (model.ts). Vectors are returned raw; the daemon normalizes them.
 */
import { LlamaVocabularyType, type LlamaModel, type Token } from "node-llama-cpp";
import type { EmbedJob } from "../types.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** Runs one embed job: one `embedded` or `failed` message. */
export function runEmbed(host: JobHost, id: number, job: EmbedJob): Promise<void> {
  return withJob(host, id, { what: "embedding" }, (j) => embed(j, job));
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

async function embed(j: Job, job: EmbedJob): Promise<void> {
  const { model, context } = j.model;
  // node-llama-cpp's embedding context takes at most contextSize-1 tokens.
  const limit = context.contextSize - 1;
  const bos = model.tokens.bos;
  const withBos = bos !== null && (model.tokens.shouldPrependBosToken || model.vocabularyType === LlamaVocabularyType.wpm);
  const end = endToken(model);
  const inputs: Token[][] = [];
  for (const text of job.inputs) {
    let tokens = [...(withBos && bos !== null ? [bos] : []), ...model.tokenize(text, false)];
    const length = tokens.length + (end === null ? 0 : 1);
    if (length > limit) {
      if (!job.truncate) throw new JobFailure("invalid", `input length exceeds maximum context length (${length} tokens > ${limit})`);
      tokens = tokens.slice(0, limit - (end === null ? 0 : 1)); // Ollama keeps the start of an input that is too long
    }
    inputs.push(end === null ? tokens : [...tokens, end]);
  }
  const ectx = await j.model.embeddingContext();
  const embeddings: number[][] = [];
  let promptTokens = 0;
  for (const tokens of inputs) {
    if (j.signal.aborted) throw new JobFailure("other", "cancelled");
    const vector = tokens.length === 0 ? [] : [...(await ectx.getEmbeddingFor(tokens)).vector];
    embeddings.push(vector.length === 0 ? new Array<number>(model.embeddingVectorSize).fill(0) : vector);
    promptTokens += tokens.length;
  }
  j.send({ type: "embedded", id: j.id, result: { embeddings, promptTokens } });
}
