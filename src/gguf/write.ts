/**
 * Writes a GGUF file from metadata and a tensor plan (the encoding is encode.ts's), with random
 * weights deterministic from a seed, atomically: a temporary file renamed into place. Tensors are
 * generated and written in chunks, so even a 1B-parameter model never sits in memory. Used by every
 * writer: make-model.ts (llama), make-bert.ts (encoders), make-lora.ts (adapters).
 */
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { bytesFor, count, encodeHeader, encodeValues, padded, tensorBytes, type MetaValue, type TensorPlan } from "./encode.js";

export type { MetaValue, TensorPlan };

/** Standard deviation of the random weights. */
const STD = 0.02;
/** Elements generated per chunk: a multiple of the Q8_0 block size, ~4 MB of f32. */
const CHUNK = 1 << 20;

let tmpCounter = 0;

/**
 * Writes `kv` and `tensors` to `file`; returns its size in bytes and its parameter count. Each
 * tensor's values come from its own seed (`seed` mixed with its `seedIndex`, else its position).
 */
export async function writeGguf(file: string, kv: [string, MetaValue][], tensors: TensorPlan[], seed: number): Promise<{ bytes: number; parameters: number }> {
  const header = encodeHeader(kv, tensors);
  const tmp = `${file}.${process.pid}.${++tmpCounter}.tmp`;
  const fh = await open(tmp, "w");
  try {
    await fh.write(header);
    for (const [i, t] of tensors.entries()) await writeTensor(fh, t, mix(seed, t.seedIndex ?? i));
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

async function writeTensor(fh: FileHandle, t: TensorPlan, seed: number): Promise<void> {
  const total = count(t.dims);
  const values = new Float32Array(Math.min(CHUNK, total));
  const out = Buffer.alloc(bytesFor(t.type, values.length));
  const rng = xorshift128State(seed);
  const amp = STD * Math.sqrt(3); // uniform(-a, a) has standard deviation a / sqrt(3)
  for (let done = 0; done < total; done += values.length) {
    const n = Math.min(values.length, total - done);
    const chunk = values.subarray(0, n);
    if (t.fill === "ones") chunk.fill(1);
    else if (t.fill === "zeros") chunk.fill(0);
    else fillUniform(chunk, rng, amp);
    for (const r of t.zeroRows ?? []) {
      const row = r * (t.dims[0] as number) - done;
      chunk.fill(0, Math.max(0, row), Math.max(0, Math.min(n, row + (t.dims[0] as number))));
    }
    const size = encodeValues(t.type, chunk, out);
    await fh.write(out, 0, size);
  }
  const pad = padded(tensorBytes(t)) - tensorBytes(t);
  if (pad > 0) await fh.write(Buffer.alloc(pad));
}

/** Seeds xorshift128 (never all zero) from a 32-bit seed with splitmix32. */
function xorshift128State(seed: number): Uint32Array {
  const state = new Uint32Array(4);
  let x = seed >>> 0;
  for (let i = 0; i < 4; i++) {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    state[i] = (z ^ (z >>> 16)) >>> 0 || 1;
  }
  return state;
}

/** Fills `out` with uniform values in [-amp, amp) from xorshift128 (fast; weights need no better). */
function fillUniform(out: Float32Array, state: Uint32Array, amp: number): void {
  let x = state[0] as number, y = state[1] as number, z = state[2] as number, w = state[3] as number;
  const k = (2 * amp) / 4294967296;
  for (let i = 0; i < out.length; i++) {
    const t = x ^ (x << 11);
    x = y; y = z; z = w;
    w = w ^ (w >>> 19) ^ (t ^ (t >>> 8));
    out[i] = (w | 0) * k;
  }
  state.set([x, y, z, w]);
}

/** Derives an independent per-tensor seed, so a tensor's values do not depend on chunking. */
function mix(seed: number, index: number): number {
  let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca77)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0;
}
