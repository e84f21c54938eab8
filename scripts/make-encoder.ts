/**
 * The `--arch bert` and `--lora-for` modes of `scripts/make-model`: BERT encoder models (embedding
 * or reranker) and LoRA adapters, over src/gguf/make-bert.ts and src/gguf/make-lora.ts.
 */
import { parseArgs } from "node:util";
import { makeBert, type MakeBertOptions } from "../src/gguf/make-bert.js";
import { makeLora } from "../src/gguf/make-lora.js";
import { vocabFile } from "../src/gguf/family-vocab.js";

export const ENCODER_USAGE = `
BERT encoders (random weights, the WordPiece vocabulary of a vocabulary GGUF):
  make-model --out FILE --arch bert --vocab-file VOCAB [--pooling cls|mean|rank] [--llama-src DIR]
             [--embd N] [--layers N] [--heads N] [--ffn N] [--ctx N] [--type T] [--seed N] [--name NAME]
  VOCAB: a vocabulary GGUF file, or a family of llama.cpp's models/ggml-vocab-FAMILY.gguf:
  bert-bge (read from the llama.cpp source node-llama-cpp ships, or from --llama-src DIR).
  --pooling rank writes a reranker (classification head cls / cls.output, pooling_type RANK).

LoRA adapters for a base model (any architecture llama.cpp loads adapters for):
  make-model --out FILE --lora-for BASE.gguf [--rank N] [--alpha X] [--seed N] [--name NAME]
`;

/** True when argv asks for an encoder or an adapter rather than a llama model. */
export function isEncoderArgs(argv: string[]): boolean {
  return argv.some((a) => a === "--lora-for" || a.startsWith("--lora-for=") || a === "--arch" || a.startsWith("--arch="));
}

/** Writes what argv asks for; returns the line to print. Throws on a bad flag. */
export async function runEncoder(argv: string[]): Promise<string> {
  const str = { type: "string" } as const;
  const { values: v } = parseArgs({
    args: argv,
    strict: true,
    options: { out: str, arch: str, "vocab-file": str, "llama-src": str, pooling: str, embd: str, layers: str, heads: str, ffn: str, ctx: str, type: str,
      seed: str, name: str, "lora-for": str, rank: str, alpha: str },
  });
  if (typeof v.out !== "string") throw new Error("--out FILE is required");
  const int = (flag: string, raw: string | undefined): number | undefined => {
    if (raw === undefined) return undefined;
    if (!/^\d+$/.test(raw)) throw new Error(`--${flag} must be a non-negative integer`);
    return Number(raw);
  };
  const seed = int("seed", v.seed);
  if (v["lora-for"] !== undefined) {
    const alpha = v.alpha === undefined ? undefined : Number(v.alpha);
    if (alpha !== undefined && !Number.isFinite(alpha)) throw new Error("--alpha must be a number");
    const r = await makeLora(v.out, { base: v["lora-for"], rank: int("rank", v.rank), alpha, seed, name: v.name });
    return `wrote ${r.file}: LoRA adapter for ${r.architecture}, ${r.adapted.length} tensors, rank ${r.rank}, alpha ${r.alpha}, ${(r.bytes / 2 ** 20).toFixed(2)} MiB`;
  }
  if (v.arch !== "bert") throw new Error(`unknown --arch '${v.arch ?? ""}' (this mode writes 'bert'; llama models take no --arch)`);
  if (v["vocab-file"] === undefined) throw new Error("--arch bert needs --vocab-file (a vocabulary GGUF, or bert-bge for llama.cpp's)");
  if (v.pooling !== undefined && !["cls", "mean", "rank"].includes(v.pooling)) throw new Error(`unknown --pooling '${v.pooling}'`);
  if (v.type !== undefined && !["f32", "f16", "q8_0"].includes(v.type)) throw new Error(`unknown --type '${v.type}'`);
  const options: MakeBertOptions = {
    vocabFile: await vocabFile(v["vocab-file"], v["llama-src"]),
    pooling: v.pooling as MakeBertOptions["pooling"],
    embeddingLength: int("embd", v.embd), layers: int("layers", v.layers), heads: int("heads", v.heads),
    feedForwardLength: int("ffn", v.ffn), contextLength: int("ctx", v.ctx), type: v.type as MakeBertOptions["type"], seed, name: v.name,
  };
  const defined = Object.fromEntries(Object.entries(options).filter(([, x]) => x !== undefined)) as unknown as MakeBertOptions;
  const r = await makeBert(v.out, defined);
  return (
    `wrote ${r.file}: bert ${r.pooling === "rank" ? "reranker" : `embedding model (${r.pooling} pooling)`}, ${(r.parameters / 1e6).toFixed(2)}M parameters, ` +
    `${(r.bytes / 2 ** 20).toFixed(1)} MiB, vocab ${r.vocabSize}, embd ${r.embeddingLength}`
  );
}
