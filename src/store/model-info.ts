/**
 * What `/api/tags` and `/api/show` report about a stored model: `details` (from the config blob,
 * completed from the GGUF header), `model_info` (GGUF metadata flattened as Ollama shows it),
 * and Ollama's text form of the parameters. GGUF headers are read with the bounded
 * reader in gguf.ts (the parent never loads node-llama-cpp) and cached per digest.
 */
import { LRUCache } from "lru-cache";
import type { ModelDetails } from "../api/model-types.js";
import { readGgufMetadata, type GgufMetadata, type GgufValue } from "../gguf/gguf.js";
import { MEDIA, type Manifest, type ModelStore } from "./store.js";

/** llama.cpp's `general.file_type` values (enum llama_ftype). */
const FILE_TYPES: Record<number, string> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M",
  13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS",
  21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
  29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
};

/** GGUF headers being read or read, by digest (a failed read is dropped, so the next call tries again). */
const cache = new LRUCache<string, Promise<GgufMetadata>>({ max: 32 });

/** The GGUF metadata of a blob (with its parameter count), cached by digest. */
export function ggufOf(store: ModelStore, digest: string): Promise<GgufMetadata> {
  let hit = cache.get(digest);
  if (!hit) {
    const reading = store.insideStore(store.blobPath(digest)).then((file) => readGgufMetadata(file, {}, { tensors: true }));
    reading.catch(() => {
      if (cache.peek(digest) === reading) cache.delete(digest);
    });
    cache.set(digest, reading);
    hit = reading;
  }
  return hit;
}

interface ConfigBlob {
  model_format?: string;
  model_family?: string;
  model_families?: string[] | null;
  model_type?: string;
  file_type?: string;
}

/** `details` from the config blob, with gaps filled from the GGUF header. */
export async function modelDetails(store: ModelStore, manifest: Manifest): Promise<ModelDetails> {
  const config = await store
    .readBlobText(manifest.config.digest)
    .then((t) => JSON.parse(t) as ConfigBlob)
    .catch(() => ({}) as ConfigBlob);
  const details: ModelDetails = {
    parent_model: "",
    format: config.model_format || "gguf",
    family: config.model_family ?? "",
    families: config.model_families ?? (config.model_family ? [config.model_family] : null),
    parameter_size: config.model_type ?? "",
    quantization_level: config.file_type ?? "",
  };
  const model = manifest.layers.find((l) => l.mediaType === MEDIA.model);
  if (model && (!details.family || !details.parameter_size || !details.quantization_level)) {
    const gguf = await ggufOf(store, model.digest).catch(() => undefined);
    if (gguf) {
      const arch = gguf.metadata["general.architecture"];
      if (!details.family && typeof arch === "string") {
        details.family = arch;
        details.families ??= [arch];
      }
      if (!details.parameter_size && gguf.parameterCount !== undefined) details.parameter_size = humanNumber(gguf.parameterCount);
      const ft = gguf.metadata["general.file_type"];
      if (!details.quantization_level && typeof ft === "number") details.quantization_level = FILE_TYPES[ft] ?? "unknown";
    }
  }
  return details;
}

/** `model_info`: every metadata key, long arrays as `null` (Ollama's non-verbose form), bigints as numbers. */
export function modelInfo(gguf: GgufMetadata): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(gguf.metadata)) out[k] = jsonValue(v);
  if (gguf.parameterCount !== undefined) out["general.parameter_count"] = gguf.parameterCount;
  return out;
}

function jsonValue(v: GgufValue): unknown {
  if (typeof v === "bigint") return Number(v);
  if (Array.isArray(v)) return v.map(jsonValue);
  return v;
}

/** Ollama's `parameters` text: one `key value` line per value, the key padded to 30 columns. */
export function parametersText(params: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    for (const value of Array.isArray(v) ? v : [v]) lines.push(`${k.padEnd(30)} ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
  }
  return lines.join("\n");
}

/** Ollama's `format.HumanNumber`: 8030261248 → "8.0B", 494032768 → "494.03M". */
export function humanNumber(n: number): string {
  const fmt = (x: number, digits: number, unit: string) => (Number.isInteger(x) ? `${x}${unit}` : `${x.toFixed(digits)}${unit}`);
  if (n >= 1e9) return fmt(n / 1e9, 1, "B");
  if (n >= 1e6) return fmt(n / 1e6, 2, "M");
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

/** The file type name of a GGUF (`Q8_0`, ...), or "" when unknown. */
export function fileTypeName(gguf: GgufMetadata): string {
  const ft = gguf.metadata["general.file_type"];
  return typeof ft === "number" ? (FILE_TYPES[ft] ?? "") : "";
}
