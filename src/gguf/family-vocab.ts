/**
 * A real family's tokenizer and chat template for generated models (`make-model --vocab/--template`):
 * every `tokenizer.*` key of a GGUF (llama.cpp's `models/ggml-vocab-*.gguf` are vocabulary-only
 * files of Llama 3, Qwen, Gemma, Phi-3, DeepSeek, ...) copied as is, and a Jinja chat template from
 * a file (llama.cpp's `models/templates/*.jinja`). A script/test tool: nothing in the daemon uses it.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { readGgufMetadata, type GgufValue } from "./gguf.js";
import { bundledFile } from "./llama-bundle.js";
import type { MetaValue } from "./encode.js";

/** Tokenizer metadata to write into a generated model in place of its own SentencePiece vocabulary. */
export interface CopiedTokenizer {
  /** `tokenizer.*` keys in the source file's order (its chat template included, if it has one). */
  kv: [string, MetaValue][];
  /** Number of tokens: the model's vocabulary size. */
  size: number;
}

/** Reads every `tokenizer.*` key of a GGUF file. */
export async function readTokenizer(file: string): Promise<CopiedTokenizer> {
  // Vocabularies reach ~260k tokens (Gemma); the default limits drop arrays that long.
  const meta = await readGgufMetadata(file, { maxArrayItems: 1_000_000, maxDepth: 1 });
  const kv: [string, MetaValue][] = [];
  for (const [key, value] of Object.entries(meta.metadata)) {
    if (!key.startsWith("tokenizer.")) continue;
    kv.push([key, metaValue(key, value)]);
  }
  const tokens = meta.metadata["tokenizer.ggml.tokens"];
  if (!Array.isArray(tokens)) throw new Error(`${file} has no tokenizer.ggml.tokens`);
  return { kv, size: tokens.length };
}

function metaValue(key: string, value: GgufValue): MetaValue {
  if (typeof value === "string") return { t: "str", v: value };
  if (typeof value === "boolean") return { t: "bool", v: value };
  if (typeof value === "number" || typeof value === "bigint") return { t: "u32", v: Number(value) };
  if (Array.isArray(value)) {
    if (value.every((x) => typeof x === "string")) return { t: "strs", v: value as string[] };
    // Scores are floats; token types and every other number array are integers.
    if (key.endsWith(".scores")) return { t: "f32s", v: value.map(Number) };
    return { t: "i32s", v: value.map(Number) };
  }
  throw new Error(`cannot copy ${key}: unsupported value`);
}

/**
 * `pathOrFamily` as a file; else llama.cpp's `models/ggml-vocab-<family>.gguf` (`bert-bge`, or the
 * file's name itself), from `llamaSrc` when given, else from node-llama-cpp's bundled source.
 */
export async function vocabFile(pathOrFamily: string, llamaSrc: string | undefined): Promise<string> {
  if (existsSync(pathOrFamily)) return pathOrFamily;
  if (pathOrFamily.includes("/")) throw new Error(`no file '${pathOrFamily}'`);
  const name = /^ggml-vocab-.+\.gguf$/.test(pathOrFamily) ? pathOrFamily : `ggml-vocab-${pathOrFamily}.gguf`;
  if (llamaSrc) return path.join(llamaSrc, "models", name);
  return bundledFile(`models/${name}`);
}

/** `pathOrName` as a file, else llama.cpp's `models/templates/<name>.jinja` (from `llamaSrc`, else the bundle). */
export async function readTemplate(pathOrName: string, llamaSrc: string | undefined): Promise<string> {
  if (existsSync(pathOrName)) return readFile(pathOrName, "utf8");
  if (pathOrName.includes("/")) throw new Error(`no file '${pathOrName}'`);
  const file = path.join("models", "templates", `${pathOrName.replace(/\.jinja$/, "")}.jinja`);
  return readFile(llamaSrc ? path.join(llamaSrc, file) : await bundledFile(file), "utf8");
}

/** One of a Hugging Face tokenizer's `added_tokens_decoder` entries. */
export interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/**
 * A base vocabulary with a model's own added tokens written over it, as llama.cpp's
 * convert_hf_to_gguf.py writes them: special (or special-looking, `<|…|>`/`<｜…｜>`) tokens as
 * CONTROL (3), the others as USER_DEFINED (4). For models that share a base vocabulary's merges
 * and differ only in their added tokens (Qwen 3 and DeepSeek-R1-Distill-Qwen over Qwen2's), whose
 * own vocabulary file llama.cpp does not ship. `set` replaces scalar keys (`tokenizer.ggml.pre`,
 * the bos/eos ids, `add_bos_token`).
 */
export function withAddedTokens(base: CopiedTokenizer, added: readonly AddedToken[], set: Record<string, MetaValue> = {}): CopiedTokenizer {
  const tokensKv = base.kv.find(([k]) => k === "tokenizer.ggml.tokens")?.[1];
  const typesKv = base.kv.find(([k]) => k === "tokenizer.ggml.token_type")?.[1];
  if (tokensKv?.t !== "strs" || typesKv?.t !== "i32s") throw new Error("the base tokenizer has no tokens or token types");
  const tokens = [...tokensKv.v];
  const types = [...typesKv.v];
  for (const a of added) {
    if (a.id < 0 || a.id >= tokens.length) throw new RangeError(`added token ${a.id} is outside the vocabulary (${tokens.length})`);
    tokens[a.id] = a.content;
    types[a.id] = a.special || looksSpecial(a.content) ? 3 : 4;
  }
  const kv: [string, MetaValue][] = base.kv
    .filter(([k]) => !(k in set))
    .map(([k, v]) => [k, k === "tokenizer.ggml.tokens" ? { t: "strs", v: tokens } : k === "tokenizer.ggml.token_type" ? { t: "i32s", v: types } : v]);
  return { kv: [...kv, ...Object.entries(set)], size: tokens.length };
}

/** convert_hf_to_gguf.py's does_token_look_special. */
function looksSpecial(text: string): boolean {
  return (
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(text) ||
    (text.startsWith("<|") && text.endsWith("|>")) ||
    (text.startsWith("<｜") && text.endsWith("｜>")) ||
    (text.startsWith("<unused") && text.endsWith(">"))
  );
}
