/**
 * A bounded GGUF reader and validator for the parent process (which must not import
 * node-llama-cpp: only the runner child does, so that a crash in native parsing takes down only that child).
 *
 * It reads the header, the key/value metadata and (optionally) the tensor infos through a
 * buffered window over the file. Every count and length is checked against the bytes left in
 * the file and against {@link GgufLimits} before anything is allocated or looped over, so a
 * crafted file fails fast with a {@link GgufError} instead of hanging or exhausting memory.
 *
 * With `tensors`, it also checks what llama.cpp's loader relies on (`gguf.cpp`,
 * `llama-model-loader.cpp`): known tensor types, at most 4 dimensions, no zero dimension, element
 * counts and byte sizes that fit in int64 (computed with BigInt, so nothing wraps), the first
 * dimension a multiple of the type's block size, names unique and short, and every tensor's data
 * aligned and inside the file, laid out back to back. {@link validateGguf} is that check: it runs
 * before any runner is started and on `/api/create`, so the native loader only ever sees files
 * whose structure is sound (a file can still be refused by llama.cpp itself, for instance an
 * unknown architecture; that failure stays in the runner child).
 */
import fs from "node:fs/promises";
import { GgufError, Reader, small, type GgufValue } from "./reader.js";
import { FIXED_VALUE_SIZE, GGML_MAX_DIMS, GGML_MAX_NAME, GGML_TYPES, GGUF_DEFAULT_ALIGNMENT, GgufValueType as T, INT64_MAX } from "./types.js";

export { GgufError, type GgufValue };

/** Bounds applied while reading; defaults in {@link DEFAULT_GGUF_LIMITS}. */
export interface GgufLimits {
  /** Most metadata keys. */
  maxKeys: number;
  /** Longest string (key or value), in bytes. */
  maxStringBytes: number;
  /** Arrays longer than this are read past and reported as `null` (their length is kept). */
  maxArrayItems: number;
  /** Deepest nesting of arrays in arrays (1 = no array inside an array, as llama.cpp requires). */
  maxDepth: number;
  /** Most tensors (only checked when tensors are read). */
  maxTensors: number;
  /** Most dimensions of one tensor. */
  maxDims: number;
}

export const DEFAULT_GGUF_LIMITS: Readonly<GgufLimits> = Object.freeze({
  maxKeys: 65_536,
  maxStringBytes: 16 * 1024 * 1024,
  maxArrayItems: 64,
  maxDepth: 4,
  // The largest published models have a few thousand tensors; llama.cpp itself has no bound.
  maxTensors: 65_536,
  maxDims: GGML_MAX_DIMS,
});

/** What {@link readGgufMetadata} returns. */
export interface GgufMetadata {
  version: number;
  tensorCount: number;
  /** Keys in file order; arrays over the limit are `null`. A prototype-less object (keys are untrusted). */
  metadata: Record<string, GgufValue>;
  /** Length of every array value, kept or not. */
  arrayLengths: Record<string, number>;
  /** Sum of the element counts of all tensors (when `tensors` was asked for). */
  parameterCount?: number;
  /** File offset where tensor data starts (when `tensors` was asked for). */
  dataOffset?: number;
  /** Every tensor's name and dimensions, innermost first (when `tensors` was asked for): LoRA checks need them. */
  tensors?: GgufTensorShape[];
}

/** A tensor's name and its dimensions in GGML order (`ne[0]` first). */
export interface GgufTensorShape {
  name: string;
  dims: number[];
}

const MAGIC = 0x46554747; // "GGUF" little-endian
/** Smallest tensor info: name length (8), dimension count (4), type (4), offset (8). */
const MIN_TENSOR_INFO = 24;

/** True when the file starts with the GGUF magic (cheap check for uploads). */
export async function isGguf(file: string): Promise<boolean> {
  const fh = await fs.open(file, "r");
  try {
    const buf = Buffer.alloc(4);
    const { bytesRead } = await fh.read(buf, 0, 4, 0);
    return bytesRead === 4 && buf.readUInt32LE(0) === MAGIC;
  } finally {
    await fh.close();
  }
}

/** Limits of {@link validateGguf}: the defaults, and no nested arrays (llama.cpp refuses them). */
export const VALIDATE_LIMITS: Readonly<Partial<GgufLimits>> = Object.freeze({ maxDepth: 1 });

/**
 * Checks a model file's whole structure (header, metadata, every tensor) without reading its
 * tensor data; returns its metadata.
 * @throws GgufError with a client-safe message when the file is not a sound GGUF file.
 */
export function validateGguf(file: string, limits: Partial<GgufLimits> = {}): Promise<GgufMetadata> {
  return readGgufMetadata(file, { ...VALIDATE_LIMITS, ...limits }, { tensors: true });
}

/**
 * Reads a GGUF file's metadata within `limits`.
 * @param options.tensors also read and check the tensor infos (see the module comment) and count parameters.
 * @throws GgufError for a file that is not GGUF (v2/v3), is truncated, or breaks a limit or a rule.
 */
export async function readGgufMetadata(file: string, limits: Partial<GgufLimits> = {}, options: { tensors?: boolean } = {}): Promise<GgufMetadata> {
  const lim: GgufLimits = { ...DEFAULT_GGUF_LIMITS, ...limits };
  const fh = await fs.open(file, "r");
  try {
    const { size } = await fh.stat();
    const r = new Reader(fh, size);
    if (size < 4 || (await r.u32()) !== MAGIC) throw new GgufError("not a GGUF file");
    const version = await r.u32();
    if (version !== 2 && version !== 3) throw new GgufError(`unsupported GGUF version ${version}`);
    const tensorCount = await r.count(MIN_TENSOR_INFO, "tensor count");
    const kvCount = await r.count(8 + 4 + 1, "metadata key count");
    if (kvCount > lim.maxKeys) throw new GgufError(`too many metadata keys (${kvCount})`);
    const out: GgufMetadata = {
      version,
      tensorCount,
      metadata: Object.create(null) as Record<string, GgufValue>,
      arrayLengths: Object.create(null) as Record<string, number>,
    };
    let alignment = GGUF_DEFAULT_ALIGNMENT;
    for (let i = 0; i < kvCount; i++) {
      const key = await r.string(lim);
      if (key in out.metadata) throw new GgufError(`duplicate metadata key '${safe(key)}'`);
      const type = await r.u32();
      const value = await readValue(r, type, lim, 0, (n) => (out.arrayLengths[key] = n));
      out.metadata[key] = value;
      if (key === "general.alignment") alignment = checkAlignment(type, value);
    }
    if (options.tensors) {
      if (tensorCount > lim.maxTensors) throw new GgufError(`too many tensors (${tensorCount})`);
      const { parameters, dataOffset, shapes } = await readTensors(r, tensorCount, alignment, lim);
      out.parameterCount = parameters;
      out.dataOffset = dataOffset;
      out.tensors = shapes;
    }
    return out;
  } finally {
    await fh.close();
  }
}

/** `general.alignment` must be a u32 power of two (gguf.cpp's rule). */
function checkAlignment(type: number, value: GgufValue): number {
  if (type !== T.U32 || typeof value !== "number" || value === 0 || (value & (value - 1)) !== 0)
    throw new GgufError("general.alignment must be a power of two (u32)");
  return value;
}

async function readValue(r: Reader, type: number, lim: GgufLimits, depth: number, onLength?: (n: number) => void): Promise<GgufValue> {
  switch (type as T) {
    case T.U8: return r.num(1, (b, o) => b.readUInt8(o));
    case T.I8: return r.num(1, (b, o) => b.readInt8(o));
    case T.U16: return r.num(2, (b, o) => b.readUInt16LE(o));
    case T.I16: return r.num(2, (b, o) => b.readInt16LE(o));
    case T.U32: return r.u32();
    case T.I32: return r.num(4, (b, o) => b.readInt32LE(o));
    case T.F32: return r.num(4, (b, o) => b.readFloatLE(o));
    case T.BOOL: return (await r.num(1, (b, o) => b.readUInt8(o))) !== 0;
    case T.U64: return small(await r.big(false));
    case T.I64: return small(await r.big(true));
    case T.F64: return r.num(8, (b, o) => b.readDoubleLE(o));
    case T.STRING: return r.string(lim);
    case T.ARRAY: {
      if (depth >= lim.maxDepth) throw new GgufError("metadata arrays nested too deeply");
      const elemType = await r.u32();
      const minSize = FIXED_VALUE_SIZE[elemType as T] ?? (elemType === T.STRING ? 8 : elemType === T.ARRAY ? 12 : 0);
      if (minSize === 0) throw new GgufError(`unknown metadata type ${elemType}`);
      // Every element takes at least minSize bytes, so a count the file cannot hold is refused up front.
      const n = await r.count(minSize, "array length");
      onLength?.(n);
      const keep = n <= lim.maxArrayItems;
      const fixed = FIXED_VALUE_SIZE[elemType as T];
      if (!keep && fixed !== undefined) {
        await r.skip(n * fixed);
        return null;
      }
      const items: GgufValue[] = [];
      for (let i = 0; i < n; i++) {
        // Elements already in the buffer are read without a promise each (a 262k-token vocabulary
        // is half a million strings); the same checks either way.
        const buffered = r.bufferedValue(elemType, lim);
        const v = buffered !== undefined ? buffered : await readValue(r, elemType, lim, depth + 1);
        if (keep) items.push(v);
      }
      return keep ? items : null;
    }
    default:
      throw new GgufError(`unknown metadata type ${type}`);
  }
}

interface TensorInfo {
  name: string;
  bytes: bigint;
  offset: bigint;
  ne: bigint[];
}

/** Reads and checks every tensor info, then where the data lies; returns the parameter count. */
async function readTensors(
  r: Reader,
  count: number,
  alignment: number,
  lim: GgufLimits,
): Promise<{ parameters: number; dataOffset: number; shapes: GgufTensorShape[] }> {
  const names = new Set<string>();
  const tensors: TensorInfo[] = [];
  let parameters = 0n;
  for (let i = 0; i < count; i++) {
    const info = await readTensorInfo(r, lim);
    if (names.has(info.name)) throw new GgufError(`duplicate tensor name '${safe(info.name)}'`);
    names.add(info.name);
    parameters += info.elements;
    tensors.push(info);
  }
  const dataOffset = Math.ceil(r.position / alignment) * alignment;
  const dataSize = BigInt(r.size) - BigInt(dataOffset);
  // llama.cpp requires the data laid out back to back, each tensor padded to the alignment, and
  // every tensor inside the file (a lying offset would otherwise read outside the mapping).
  let expected = 0n;
  const align = BigInt(alignment);
  for (const t of tensors) {
    if (t.offset % align !== 0n) throw new GgufError(`tensor '${safe(t.name)}' data offset ${t.offset} is not aligned to ${alignment} bytes`);
    if (t.offset !== expected) throw new GgufError(`tensor '${safe(t.name)}' has data offset ${t.offset}, expected ${expected}`);
    if (t.offset + t.bytes > dataSize) throw new GgufError(`tensor '${safe(t.name)}' data lies outside the file (truncated GGUF file?)`);
    expected += ((t.bytes + align - 1n) / align) * align;
  }
  const shapes = tensors.map((t) => ({ name: t.name, dims: t.ne.map(Number) }));
  return { parameters: Number(parameters), dataOffset, shapes };
}

async function readTensorInfo(r: Reader, lim: GgufLimits): Promise<TensorInfo & { elements: bigint }> {
  const name = await r.string({ ...lim, maxStringBytes: GGML_MAX_NAME - 1 }, "tensor name");
  const dims = await r.u32();
  if (dims > lim.maxDims) throw new GgufError(`tensor '${safe(name)}' has ${dims} dimensions (at most ${lim.maxDims})`);
  const ne: bigint[] = [];
  let elements = 1n;
  for (let d = 0; d < dims; d++) {
    const n = await r.big(false);
    if (n === 0n) throw new GgufError(`tensor '${safe(name)}' has a zero dimension`);
    elements *= n; // BigInt: a product of four u64 values cannot wrap
    if (elements > INT64_MAX) throw new GgufError(`tensor '${safe(name)}' has too many elements`);
    ne.push(n);
  }
  const typeId = await r.u32();
  const type = GGML_TYPES.get(typeId);
  if (!type) throw new GgufError(`tensor '${safe(name)}' has unknown type ${typeId}`);
  const blockSize = BigInt(type.blockSize);
  if ((ne[0] ?? 1n) % blockSize !== 0n)
    throw new GgufError(`tensor '${safe(name)}' of type ${type.name}: first dimension ${ne[0] ?? 1n} is not a multiple of its block size ${type.blockSize}`);
  const bytes = (elements / blockSize) * BigInt(type.typeSize);
  if (bytes > INT64_MAX) throw new GgufError(`tensor '${safe(name)}' is too large`);
  const offset = await r.big(false);
  return { name, elements, bytes, offset, ne };
}

/** A name from the file, fit for an error message: control characters escaped, length bounded. */
function safe(s: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  const clean = s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return clean.length > 80 ? `${clean.slice(0, 77)}...` : clean;
}
