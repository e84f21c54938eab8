/**
 * Whether a model is a reranker, from its GGUF header alone (the parent never loads
 * node-llama-cpp): node-llama-cpp's `supportsRanking` rule — a classification head (`cls.weight`
 * or `cls.output.weight`, which llama.cpp's RANK pooling applies) and a way to join query and
 * document (a SEP or EOS token, or a `tokenizer.chat_template.rerank`).
 */
import type { GgufMetadata } from "./gguf.js";

/** True when `meta` (read with tensors) describes a model node-llama-cpp can rank with. */
export function isReranker(meta: GgufMetadata): boolean {
  const head = (meta.tensors ?? []).some((t) => t.name === "cls.weight" || t.name === "cls.output.weight");
  if (!head) return false;
  const m = meta.metadata;
  const template = m["tokenizer.chat_template.rerank"];
  return m["tokenizer.ggml.seperator_token_id"] !== undefined || m["tokenizer.ggml.eos_token_id"] !== undefined ||
    (typeof template === "string" && template.includes("{query}") && template.includes("{document}"));
}
