/**
 * Writes a GGUF file from metadata and a tensor plan with make-model's encoder (random weights,
 * deterministic from a seed), atomically: a temporary file renamed into place. Used by the
 * encoder and LoRA writers (make-bert.ts, make-lora.ts); make-model.ts keeps its own loop.
 */
import { open, rename, rm } from "node:fs/promises";
import { encodeHeader, mix, padded, tensorBytes, count, writeTensor, type MetaValue, type TensorPlan } from "./make-model.js";

export type { MetaValue, TensorPlan };

let tmpCounter = 0;

/** Writes `kv` and `tensors` to `file`; returns its size in bytes and its parameter count. */
export async function writeGguf(file: string, kv: [string, MetaValue][], tensors: TensorPlan[], seed: number): Promise<{ bytes: number; parameters: number }> {
  const header = encodeHeader(kv, tensors);
  const tmp = `${file}.${process.pid}.w${++tmpCounter}.tmp`;
  const fh = await open(tmp, "w");
  try {
    await fh.write(header);
    for (const [i, t] of tensors.entries()) await writeTensor(fh, t, mix(seed, i));
    await fh.close();
    await rename(tmp, file);
  } catch (err) {
    await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
  return {
    bytes: header.length + tensors.reduce((n, t) => n + padded(tensorBytes(t)), 0),
    parameters: tensors.reduce((n, t) => n + count(t.dims), 0),
  };
}
