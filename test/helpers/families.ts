/**
 * Real model families for tests: llama.cpp's vocabulary file of the family (`models/ggml-vocab-*.gguf`,
 * with its tokenizer test vectors) and the family's own chat template (`models/templates/*.jinja`).
 *
 * Qwen 3 and DeepSeek-R1-Distill-Qwen have no vocabulary file of their own in llama.cpp: both are
 * Qwen2's BPE vocabulary and pre-tokenizer with their own added tokens in the slots Qwen2's file
 * leaves as padding. Their added tokens are copied here from each model's `tokenizer_config.json`
 * (`added_tokens_decoder`, Qwen/Qwen3-4B and deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B) and written
 * as convert_hf_to_gguf.py writes them (src/gguf/family-vocab.ts withAddedTokens).
 */
import path from "node:path";
import { readTemplate, readTokenizer, withAddedTokens, type AddedToken, type CopiedTokenizer } from "../../src/gguf/family-vocab.js";
import type { MakeModelOptions } from "../../src/gguf/make-model.js";
import { llamaSrc } from "./llama-src.js";

export interface Family {
  name: string;
  /** llama.cpp's vocabulary file (`ggml-vocab-<vocab>.gguf`) and its test vectors. */
  vocab: string;
  /** llama.cpp's `models/templates/<template>.jinja`. */
  template: string;
  /** The family's own tokens over the base vocabulary, and scalar keys it sets. */
  added?: { tokens: readonly AddedToken[]; set: Parameters<typeof withAddedTokens>[2] };
}

const tok = (id: number, content: string, special: boolean): AddedToken => ({ id, content, special });
/** Qwen2.5's added tokens from 151646 on (151643-151645 are already in llama.cpp's qwen2 file). */
const QWEN25_ADDED = [
  ...[
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
  ].map((c, i) => tok(151646 + i, c, true)),
  ...["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"].map((c, i) =>
    tok(151657 + i, c, false),
  ),
];
const QWEN3_ADDED = [...QWEN25_ADDED, ...["<tool_response>", "</tool_response>", "<think>", "</think>"].map((c, i) => tok(151665 + i, c, false))];
const R1_QWEN_ADDED = [
  tok(151643, "<｜end▁of▁sentence｜>", true), tok(151644, "<｜User｜>", false), tok(151645, "<｜Assistant｜>", false),
  tok(151646, "<｜begin▁of▁sentence｜>", true), tok(151647, "<|EOT|>", false), tok(151648, "<think>", false), tok(151649, "</think>", false),
  ...QWEN25_ADDED.filter((t) => t.id >= 151650),
];
const u32 = (v: number) => ({ t: "u32" as const, v });
const bool = (v: boolean) => ({ t: "bool" as const, v });

export const FAMILIES: readonly Family[] = [
  { name: "llama3.1", vocab: "llama-bpe", template: "meta-llama-Llama-3.1-8B-Instruct" },
  { name: "llama3.2", vocab: "llama-bpe", template: "meta-llama-Llama-3.2-3B-Instruct" },
  { name: "qwen2.5", vocab: "qwen2", template: "Qwen-Qwen2.5-7B-Instruct" },
  {
    name: "qwen3", vocab: "qwen2", template: "Qwen-Qwen3-0.6B",
    added: {
      tokens: QWEN3_ADDED,
      set: { "tokenizer.ggml.eos_token_id": u32(151645), "tokenizer.ggml.padding_token_id": u32(151643), "tokenizer.ggml.add_bos_token": bool(false) },
    },
  },
  { name: "qwen3.5", vocab: "qwen35", template: "Qwen3.5-4B" },
  {
    name: "deepseek-r1", vocab: "qwen2", template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    added: {
      tokens: R1_QWEN_ADDED,
      set: {
        "tokenizer.ggml.pre": { t: "str", v: "deepseek-r1-qwen" },
        "tokenizer.ggml.bos_token_id": u32(151646),
        "tokenizer.ggml.eos_token_id": u32(151643),
        "tokenizer.ggml.padding_token_id": u32(151643),
        "tokenizer.ggml.add_bos_token": bool(true),
        "tokenizer.ggml.add_eos_token": bool(false),
      },
    },
  },
  { name: "gemma4", vocab: "gemma-4", template: "google-gemma-4-31B-it" },
  { name: "phi3.5", vocab: "phi-3", template: "microsoft-Phi-3.5-mini-instruct" },
  { name: "command-r-plus", vocab: "command-r", template: "CohereForAI-c4ai-command-r-plus-tool_use" },
];

export function vocabPath(src: string, vocab: string): string {
  return path.join(src, "models", `ggml-vocab-${vocab}.gguf`);
}

/** The family's tokenizer (its added tokens written over the base vocabulary). */
export async function familyTokenizer(f: Family, src: string): Promise<CopiedTokenizer> {
  const base = await readTokenizer(vocabPath(src, f.vocab));
  return f.added ? withAddedTokens(base, f.added.tokens, f.added.set) : base;
}

/** make-model options of a tiny model of the family: a 32-wide embedding keeps even Gemma's 262k vocabulary at a few MB. */
export async function familyModel(f: Family): Promise<MakeModelOptions> {
  const src = await llamaSrc();
  return {
    preset: "tiny",
    embeddingLength: 32,
    heads: 2,
    kvHeads: 2,
    feedForwardLength: 64,
    layers: 1,
    tokenizer: await familyTokenizer(f, src),
    template: await readTemplate(f.template, src),
  };
}
