/**
 * GGUF v3 encoding for the writers (make-model.ts, make-bert.ts, make-lora.ts): metadata values,
 * the header with its tensor infos, and tensor values as f32, f16 or Q8_0, all little-endian and
 * laid out as ggml reads them (every tensor's data padded to the alignment).
 */

/** Tensor storage types that can be written. */
export type WeightType = "f32" | "f16" | "q8_0";

/** Alignment of the tensor data (`general.alignment`). */
export const ALIGNMENT = 32;
/** ggml's tensor type numbers of the writable types. */
export const GGML_TYPE = { f32: 0, f16: 1, q8_0: 8 } as const;
/** llama.cpp's `general.file_type` of a model whose weights are all of one type. */
export const FILE_TYPE = { f32: 0, f16: 1, q8_0: 7 } as const;

/** A metadata value with its GGUF type. */
export type MetaValue =
  | { t: "str"; v: string } | { t: "u32"; v: number } | { t: "f32"; v: number } | { t: "bool"; v: boolean }
  | { t: "strs"; v: string[] } | { t: "f32s"; v: number[] } | { t: "i32s"; v: number[] };

/** A tensor to write: its name, dimensions (innermost first), type and how its values are made. */
export interface TensorPlan {
  name: string;
  dims: number[];
  type: WeightType;
  fill: "random" | "ones" | "zeros";
  /** Rows (dims[0] consecutive values each) written as zeros whatever the fill: textOnly. */
  zeroRows?: number[];
  /** Index for the per-tensor seed (make-model: the position in the model without identity layers; other writers use the position). */
  seedIndex?: number;
}

/** Appends little-endian GGUF values to a growing list of buffers. */
class Encoder {
  readonly parts: Buffer[] = [];
  private num(size: number, fill: (b: Buffer) => void): void { const b = Buffer.alloc(size); fill(b); this.parts.push(b); }
  u32(v: number): void { this.num(4, (b) => b.writeUInt32LE(v)); }
  i32(v: number): void { this.num(4, (b) => b.writeInt32LE(v)); }
  u64(v: number): void { this.num(8, (b) => b.writeBigUInt64LE(BigInt(v))); }
  f32(v: number): void { this.num(4, (b) => b.writeFloatLE(v)); }
  str(v: string): void { const s = Buffer.from(v, "utf8"); this.u64(s.length); this.parts.push(s); }
  value(m: MetaValue): void {
    // GGUF value types: UINT32 4, INT32 5, FLOAT32 6, BOOL 7, STRING 8, ARRAY 9.
    const array = <T>(type: number, items: T[], put: (x: T) => void) => { this.u32(9); this.u32(type); this.u64(items.length); items.forEach(put); };
    switch (m.t) {
      case "str": this.u32(8); this.str(m.v); break;
      case "u32": this.u32(4); this.u32(m.v); break;
      case "f32": this.u32(6); this.f32(m.v); break;
      case "bool": this.u32(7); this.num(1, (b) => b.writeUInt8(m.v ? 1 : 0)); break;
      case "strs": array(8, m.v, (x) => this.str(x)); break;
      case "f32s": {
        const b = Buffer.alloc(4 * m.v.length);
        m.v.forEach((x, i) => b.writeFloatLE(x, 4 * i));
        this.u32(9); this.u32(6); this.u64(m.v.length); this.parts.push(b); break;
      }
      case "i32s": array(5, m.v, (x) => this.i32(x)); break;
    }
  }
}

/** The header: magic, version, counts, the metadata and every tensor info with its data offset. */
export function encodeHeader(kv: [string, MetaValue][], tensors: TensorPlan[]): Buffer {
  const enc = new Encoder();
  enc.parts.push(Buffer.from("GGUF", "latin1"));
  enc.u32(3);
  enc.u64(tensors.length);
  enc.u64(kv.length);
  for (const [k, v] of kv) { enc.str(k); enc.value(v); }
  let offset = 0;
  for (const t of tensors) {
    enc.str(t.name);
    enc.u32(t.dims.length);
    t.dims.forEach((d) => enc.u64(d));
    enc.u32(GGML_TYPE[t.type]);
    enc.u64(offset);
    offset += padded(tensorBytes(t));
  }
  const header = Buffer.concat(enc.parts);
  return Buffer.concat([header, Buffer.alloc(padded(header.length) - header.length)]);
}

/** Number of elements of a tensor. */
export const count = (dims: number[]): number => dims.reduce((a, b) => a * b, 1);
/** `n` bytes rounded up to the alignment. */
export const padded = (n: number): number => Math.ceil(n / ALIGNMENT) * ALIGNMENT;
/** Bytes of `n` values of a type (Q8_0: blocks of 32 values in 34 bytes). */
export const bytesFor = (type: WeightType, n: number): number => (type === "f32" ? 4 * n : type === "f16" ? 2 * n : (n / 32) * 34);
/** Bytes of a tensor's data, before padding. */
export const tensorBytes = (t: TensorPlan): number => bytesFor(t.type, count(t.dims));

/** Encodes `values` as `type` into `out`; returns the bytes written. */
export function encodeValues(type: WeightType, values: Float32Array, out: Buffer): number {
  if (type === "f32") {
    Buffer.from(values.buffer, values.byteOffset, values.byteLength).copy(out);
    return values.byteLength;
  }
  if (type === "f16") {
    const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
    for (let i = 0; i < values.length; i++) view.setUint16(2 * i, f32ToF16(values[i] as number), true);
    return 2 * values.length;
  }
  return quantizeQ8_0(values, out);
}

/**
 * Q8_0 as ggml defines it: blocks of 32 values stored as an fp16 scale `d = max|x| / 127`
 * followed by 32 int8 `roundf(x / d)`. Writes into `out` and returns the bytes written.
 */
export function quantizeQ8_0(values: Float32Array, out: Buffer = Buffer.alloc((values.length / 32) * 34)): number {
  if (values.length % 32 !== 0) throw new RangeError("Q8_0 needs a multiple of 32 values");
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const q = new Int8Array(out.buffer, out.byteOffset, out.byteLength);
  // Written for speed (the 1B preset quantizes 10^9 values): Math.max/Math.abs instead of
  // branches on random signs, and `(v + 128.5) | 0` instead of Math.round, which is slow in V8.
  for (let b = 0, o = 0; b < values.length; b += 32, o += 34) {
    let amax = 0;
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(values[i] as number));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    view.setUint16(o, f32ToF16(d), true);
    for (let i = 0; i < 32; i++) {
      const v = (values[b + i] as number) * id;
      const shifted = v + 128.5; // in [1.5, 255.5]: truncation is floor, so this rounds half up
      let r = shifted | 0;
      if (r === shifted && v < 0) r -= 1; // roundf rounds ties away from zero
      q[o + 2 + i] = r - 128;
    }
  }
  return (values.length / 32) * 34;
}

const f32View = new Float32Array(1);
const u32View = new Uint32Array(f32View.buffer);

/** float32 → IEEE half bits, round to nearest even (what ggml's conversion does). */
export function f32ToF16(value: number): number {
  f32View[0] = value;
  const x = u32View[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = x & 0x7fffff;
  if (exp === 0xff - 127 + 15) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - exp;
    const half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (rem > mid || (rem === mid && half & 1) ? half + 1 : half);
  }
  const half = (exp << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  return sign | (rem > 0x1000 || (rem === 0x1000 && half & 1) ? half + 1 : half);
}

