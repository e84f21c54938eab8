/**
 * Writes BERT-architecture encoder models (llama.cpp's `bert`: learned position embeddings, token
 * types, post-layer-norm blocks with biases, GELU feed-forward, no causal mask) with random
 * weights and a real WordPiece vocabulary copied from a vocabulary GGUF (llama.cpp's
 * models/ggml-vocab-bert-bge.gguf). Two kinds:
 * - an embedding model (`bert.pooling_type` CLS, as bge pools), and
 * - a reranker (`pooling_type` RANK with the `cls` / `cls.output` classification head that
 *   llama.cpp's `build_pooling` applies, as bge-reranker converts).
 * Tensor names and shapes follow llama.cpp's src/models/bert.cpp and src/llama-arch.cpp.
 */
import { basename } from "node:path";
import { readGgufMetadata, type GgufValue } from "./gguf.js";
import { FILE_TYPE, type WeightType } from "./encode.js";
import { writeGguf, type MetaValue, type TensorPlan } from "./write.js";

/** llama.cpp's `enum llama_pooling_type`. */
export const POOLING = { none: 0, mean: 1, cls: 2, last: 3, rank: 4 } as const;

export interface MakeBertOptions {
  /** A GGUF holding a BERT (WordPiece) tokenizer: its `tokenizer.*` keys are copied. */
  vocabFile: string;
  /** `rank`: a reranker with a classification head; otherwise an embedding model (default `cls`). */
  pooling?: "cls" | "mean" | "rank";
  embeddingLength?: number;
  layers?: number;
  heads?: number;
  feedForwardLength?: number;
  contextLength?: number;
  type?: WeightType;
  seed?: number;
  name?: string;
}

export interface MakeBertResult {
  file: string;
  bytes: number;
  parameters: number;
  vocabSize: number;
  embeddingLength: number;
  pooling: "cls" | "mean" | "rank";
}

/** Writes a BERT model to `file` (atomically). */
export async function makeBert(file: string, options: MakeBertOptions): Promise<MakeBertResult> {
  const o = {
    pooling: "cls" as const,
    embeddingLength: 64,
    layers: 2,
    heads: 4,
    feedForwardLength: 128,
    contextLength: 512,
    type: "q8_0" as WeightType,
    seed: 1,
    ...options,
  };
  for (const k of ["embeddingLength", "layers", "heads", "feedForwardLength", "contextLength"] as const) {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new RangeError(`${k} must be a positive integer`);
  }
  if (o.embeddingLength % o.heads !== 0) throw new RangeError("embeddingLength must be a multiple of heads");
  if (o.type === "q8_0" && (o.embeddingLength % 32 !== 0 || o.feedForwardLength % 32 !== 0))
    throw new RangeError("q8_0 needs embeddingLength and feedForwardLength to be multiples of 32");
  const vocab = await readVocab(o.vocabFile);
  const tokenTypes = typeof vocab.counts["tokenizer.ggml.token_type_count"] === "number" ? (vocab.counts["tokenizer.ggml.token_type_count"] as number) : 2;
  const tensors = planBert(o, vocab.size, tokenTypes);
  const u32 = (v: number): MetaValue => ({ t: "u32", v });
  const kv: [string, MetaValue][] = [
    ["general.architecture", { t: "str", v: "bert" }],
    ["general.name", { t: "str", v: o.name ?? basename(file).replace(/\.[^.]*$/, "") }],
    ["general.description", { t: "str", v: `lmd make-model: random weights, seed ${o.seed}` }],
    ["general.file_type", u32(FILE_TYPE[o.type])],
    ["general.quantization_version", u32(2)],
    ["bert.context_length", u32(o.contextLength)],
    ["bert.embedding_length", u32(o.embeddingLength)],
    ["bert.block_count", u32(o.layers)],
    ["bert.feed_forward_length", u32(o.feedForwardLength)],
    ["bert.attention.head_count", u32(o.heads)],
    ["bert.attention.layer_norm_epsilon", { t: "f32", v: 1e-12 }],
    ["bert.attention.causal", { t: "bool", v: false }],
    ["bert.pooling_type", u32(POOLING[o.pooling])],
    ...vocab.kv,
  ];
  const { bytes, parameters } = await writeGguf(file, kv, tensors, o.seed);
  return { file, bytes, parameters, vocabSize: vocab.size, embeddingLength: o.embeddingLength, pooling: o.pooling };
}

interface BertShape { embeddingLength: number; layers: number; feedForwardLength: number; contextLength: number; type: WeightType; pooling: string }

/** The tensors of llama.cpp's BERT (bert.cpp `load_arch_tensors`), GGML dimension order. */
function planBert(s: BertShape, vocabSize: number, tokenTypes: number): TensorPlan[] {
  const e = s.embeddingLength;
  const ff = s.feedForwardLength;
  const m = (name: string, dims: number[]): TensorPlan => ({ name, dims, type: s.type, fill: "random" });
  const vec = (name: string, n: number, ones = false): TensorPlan => ({ name, dims: [n], type: "f32", fill: ones ? "ones" : "random" });
  // The small tables are f32: they are looked up by row (get_rows), and stay exact.
  const out: TensorPlan[] = [
    m("token_embd.weight", [e, vocabSize]),
    { name: "token_types.weight", dims: [e, tokenTypes], type: "f32", fill: "random" },
    { name: "position_embd.weight", dims: [e, s.contextLength], type: "f32", fill: "random" },
    vec("token_embd_norm.weight", e, true),
    vec("token_embd_norm.bias", e),
  ];
  for (let i = 0; i < s.layers; i++) {
    const b = `blk.${i}.`;
    for (const p of ["attn_q", "attn_k", "attn_v", "attn_output"]) out.push(m(`${b}${p}.weight`, [e, e]), vec(`${b}${p}.bias`, e));
    out.push(vec(`${b}attn_output_norm.weight`, e, true), vec(`${b}attn_output_norm.bias`, e));
    out.push(m(`${b}ffn_up.weight`, [e, ff]), vec(`${b}ffn_up.bias`, ff), m(`${b}ffn_down.weight`, [ff, e]), vec(`${b}ffn_down.bias`, e));
    out.push(vec(`${b}layer_output_norm.weight`, e, true), vec(`${b}layer_output_norm.bias`, e));
  }
  if (s.pooling === "rank") {
    // The classification head: dense + tanh, then one output label (n_cls_out defaults to 1).
    out.push(m("cls.weight", [e, e]), vec("cls.bias", e), { name: "cls.output.weight", dims: [e, 1], type: "f32", fill: "random" }, vec("cls.output.bias", 1));
  }
  return out;
}

/** The `tokenizer.*` keys of a vocabulary GGUF, typed as llama.cpp reads them, and its size. */
async function readVocab(file: string): Promise<{ kv: [string, MetaValue][]; size: number; counts: Record<string, GgufValue> }> {
  const meta = await readGgufMetadata(file, { maxArrayItems: 1 << 22 });
  if (meta.metadata["tokenizer.ggml.model"] !== "bert") throw new Error(`${basename(file)} does not hold a BERT (WordPiece) tokenizer`);
  const kv: [string, MetaValue][] = [];
  for (const [key, value] of Object.entries(meta.metadata)) {
    if (!key.startsWith("tokenizer.")) continue;
    const typed = typedValue(key, value);
    if (typed) kv.push([key, typed]);
  }
  const tokens = meta.metadata["tokenizer.ggml.tokens"];
  if (!Array.isArray(tokens)) throw new Error(`${basename(file)} has no tokenizer.ggml.tokens`);
  return { kv, size: tokens.length, counts: meta.metadata };
}

function typedValue(key: string, v: GgufValue): MetaValue | undefined {
  if (typeof v === "string") return { t: "str", v };
  if (typeof v === "boolean") return { t: "bool", v };
  if (typeof v === "number") return Number.isInteger(v) && v >= 0 ? { t: "u32", v } : { t: "f32", v };
  if (!Array.isArray(v) || v.length === 0) return undefined;
  if (v.every((x) => typeof x === "string")) return { t: "strs", v: v as string[] };
  if (v.every((x) => typeof x === "number")) return key.endsWith(".scores") ? { t: "f32s", v: v as number[] } : { t: "i32s", v: v as number[] };
  return undefined;
}
