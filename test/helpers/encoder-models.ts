/**
 * Encoder test models and LoRA adapters from make-model's writers (src/gguf/make-bert.ts,
 * make-lora.ts), cached in the temp directory like test/helpers/models.ts's models.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { makeBert, type MakeBertOptions } from "../../src/gguf/make-bert.js";
import { makeLora, type MakeLoraOptions } from "../../src/gguf/make-lora.js";
import { llamaSrc } from "./llama-src.js";

const CACHE = path.join(os.tmpdir(), `lmd-test-models-${process.getuid?.() ?? "u"}`);

function cached(kind: string, options: object): string {
  mkdirSync(CACHE, { recursive: true });
  const key = createHash("sha256").update(JSON.stringify(options)).digest("hex").slice(0, 16);
  return path.join(CACHE, `${kind}-${key}.gguf`);
}

/** A tiny BERT with the real bge WordPiece vocabulary: `cls` (embedding) or `rank` (reranker). */
export async function bertGguf(options: Omit<MakeBertOptions, "vocabFile"> = {}): Promise<string> {
  const vocabFile = path.join(await llamaSrc(), "models", "ggml-vocab-bert-bge.gguf");
  const file = cached(`bert-${options.pooling ?? "cls"}`, options);
  if (!existsSync(file)) await makeBert(file, { vocabFile, ...options });
  return file;
}

/** A LoRA adapter for `base` (see make-lora.ts for the defaults). */
export async function loraGguf(options: MakeLoraOptions): Promise<string> {
  const file = cached("lora", { ...options, target: options.target?.source });
  if (!existsSync(file)) await makeLora(file, options);
  return file;
}
