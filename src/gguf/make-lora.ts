/**
 * Writes a LoRA adapter GGUF for a base model, in the layout llama.cpp's `llama_adapter_lora_init`
 * (src/llama-adapter.cpp) loads: `general.type = "adapter"`, `adapter.type = "lora"`,
 * `adapter.lora.alpha`, the base's `general.architecture`, and for each adapted weight `W`
 * (GGML dims `[n_in, n_out]`) a pair `W.lora_a` `[n_in, r]` and `W.lora_b` `[r, n_out]`; llama.cpp
 * adds `scale * alpha / r * B(A x)` to `W x`. Random values, deterministic from a seed.
 */
import { basename } from "node:path";
import { readGgufMetadata } from "./gguf.js";
import { writeGguf, type MetaValue, type TensorPlan } from "./write.js";

export interface MakeLoraOptions {
  /** The base model GGUF whose tensors the adapter targets. */
  base: string;
  /** LoRA rank r (default 8). */
  rank?: number;
  /**
   * `adapter.lora.alpha` (default 16 × rank). With random base weights a conventional alpha
   * (= rank) gives an update ~20× smaller than the weights, too small to change a greedy token;
   * 16 × rank makes the update about as large as the weights, so the adapter visibly applies.
   */
  alpha?: number;
  /** Which 2-D weights to adapt (default: every `blk.N.*.weight` matrix). */
  target?: RegExp;
  seed?: number;
  name?: string;
}

export interface MakeLoraResult {
  file: string;
  bytes: number;
  architecture: string;
  /** Base tensors adapted. */
  adapted: string[];
  rank: number;
  alpha: number;
}

const DEFAULT_TARGET = /^blk\.\d+\.[a-z_]+\.weight$/;

/** Writes a LoRA adapter for `options.base` to `file` (atomically). */
export async function makeLora(file: string, options: MakeLoraOptions): Promise<MakeLoraResult> {
  const rank = options.rank ?? 8;
  if (!Number.isInteger(rank) || rank < 1) throw new RangeError("rank must be a positive integer");
  const alpha = options.alpha ?? 16 * rank;
  const base = await readGgufMetadata(options.base, {}, { tensors: true });
  const arch = base.metadata["general.architecture"];
  if (typeof arch !== "string") throw new Error(`${basename(options.base)} has no general.architecture`);
  const target = options.target ?? DEFAULT_TARGET;
  const adapted = (base.tensors ?? []).filter((t) => t.dims.length === 2 && target.test(t.name));
  if (adapted.length === 0) throw new Error(`no tensor of ${basename(options.base)} matches ${String(target)}`);
  const tensors: TensorPlan[] = adapted.flatMap((t) => {
    const [nIn, nOut] = t.dims as [number, number];
    return [
      { name: `${t.name}.lora_a`, dims: [nIn, rank], type: "f32" as const, fill: "random" as const },
      { name: `${t.name}.lora_b`, dims: [rank, nOut], type: "f32" as const, fill: "random" as const },
    ];
  });
  const kv: [string, MetaValue][] = [
    ["general.architecture", { t: "str", v: arch }],
    ["general.type", { t: "str", v: "adapter" }],
    ["general.name", { t: "str", v: options.name ?? basename(file).replace(/\.[^.]*$/, "") }],
    ["adapter.type", { t: "str", v: "lora" }],
    ["adapter.lora.alpha", { t: "f32", v: alpha }],
  ];
  const { bytes } = await writeGguf(file, kv, tensors, options.seed ?? 7);
  return { file, bytes, architecture: arch, adapted: adapted.map((t) => t.name), rank, alpha };
}
