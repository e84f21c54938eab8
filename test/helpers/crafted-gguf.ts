/**
 * Crafted GGUF files for the hostile-input tests: a small builder that writes any header the
 * format can express (and many it should not), a structurally valid base file, and a corpus of
 * malformed variants, each with the refusal that gguf/gguf.ts must give for it.
 *
 * The base file is structurally sound (it passes validation) but is not a usable llama model:
 * llama.cpp itself refuses it, inside a runner child. That is the "reaches a runner" case.
 */

/** One tensor info. `offset` defaults to the back-to-back layout llama.cpp expects. */
export interface CraftTensor {
  name: string;
  dims: Array<number | bigint>;
  type: number;
  offset?: bigint;
}

/** Everything the builder writes; each field may be set to a value the format forbids. */
export interface CraftSpec {
  magic?: string;
  version?: number;
  /** Overrides the tensor count written in the header. */
  tensorCount?: bigint;
  /** Overrides the key count written in the header. */
  kvCount?: bigint;
  /** Encoded key/value pairs (see {@link kv}). */
  kvs?: Buffer[];
  tensors?: CraftTensor[];
  /** Alignment used to lay out the data (write `general.alignment` yourself to declare it). */
  alignment?: number;
  /** Bytes of tensor data written; default what the tensors need. */
  dataBytes?: number;
}

export const u32 = (n: number): Buffer => { const b = Buffer.alloc(4); b.writeUInt32LE(n >>> 0); return b; };
export const u64 = (n: bigint | number): Buffer => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(n))); return b; };
/** A GGUF string: u64 length, then the bytes (`length` may lie). */
export const gstr = (s: string | Buffer, length?: bigint): Buffer => {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
  return Buffer.concat([u64(length ?? BigInt(b.length)), b]);
};

/** Encoded metadata entries. */
export const kv = {
  str: (key: string, value: string) => Buffer.concat([gstr(key), u32(8), gstr(value)]),
  u32: (key: string, value: number) => Buffer.concat([gstr(key), u32(4), u32(value)]),
  u32s: (key: string, values: number[]) => Buffer.concat([gstr(key), u32(9), u32(4), u64(values.length), ...values.map(u32)]),
  raw: (...parts: Buffer[]) => Buffer.concat(parts),
};

/** Bytes of a tensor's data for the types the corpus uses (F32 0, F16 1, Q8_0 8). */
function tensorBytes(t: CraftTensor): bigint {
  const n = t.dims.reduce<bigint>((a, d) => a * BigInt(d), 1n);
  if (t.type === 0) return n * 4n;
  if (t.type === 1) return n * 2n;
  if (t.type === 8) return (n / 32n) * 34n;
  return n; // other types: whatever, the validator refuses them before sizes matter
}

/** Writes a GGUF file from `spec`. */
export function buildGguf(spec: CraftSpec = {}): Buffer {
  const alignment = spec.alignment ?? 32;
  const kvs = spec.kvs ?? baseKvs();
  const tensors = spec.tensors ?? baseTensors();
  const pad = (n: bigint) => ((n + BigInt(alignment) - 1n) / BigInt(alignment)) * BigInt(alignment);
  const parts: Buffer[] = [
    Buffer.from(spec.magic ?? "GGUF", "latin1"),
    u32(spec.version ?? 3),
    u64(spec.tensorCount ?? BigInt(tensors.length)),
    u64(spec.kvCount ?? BigInt(kvs.length)),
    ...kvs,
  ];
  let offset = 0n;
  for (const t of tensors) {
    parts.push(gstr(t.name), u32(t.dims.length), ...t.dims.map((d) => u64(d)), u32(t.type), u64(t.offset ?? offset));
    offset += pad(tensorBytes(t));
  }
  const header = Buffer.concat(parts);
  const headerPadded = Number(pad(BigInt(header.length)));
  // Sizes the file cannot hold (the overflow cases) get no data: they are refused before it matters.
  const data = spec.dataBytes ?? (offset <= 1n << 24n ? Number(offset) : 0);
  return Buffer.concat([header, Buffer.alloc(headerPadded - header.length), Buffer.alloc(Math.max(0, data))]);
}

function baseKvs(): Buffer[] {
  return [kv.str("general.architecture", "llama"), kv.str("general.name", "crafted"), kv.u32("general.alignment", 32)];
}

function baseTensors(): CraftTensor[] {
  return [
    { name: "token_embd.weight", dims: [64, 4], type: 8 },
    { name: "output_norm.weight", dims: [64], type: 0 },
    { name: "output.weight", dims: [64, 4], type: 1 },
  ];
}

/** A malformed file and the refusal it must get (matched against the GgufError message). */
export interface CraftedCase {
  name: string;
  data: Buffer;
  message: RegExp;
}

/** The corpus: every way the validator must refuse a file (none of them may reach llama.cpp). */
export function craftedCorpus(): CraftedCase[] {
  const T = baseTensors();
  const withTensor = (i: number, change: Partial<CraftTensor>) => T.map((t, j) => (j === i ? { ...t, ...change } : t));
  const base = buildGguf();
  const c = (name: string, data: Buffer, message: RegExp): CraftedCase => ({ name, data, message });
  return [
    c("empty file", Buffer.alloc(0), /^not a GGUF file$/),
    c("wrong magic", buildGguf({ magic: "GGML" }), /^not a GGUF file$/),
    c("version 1", buildGguf({ version: 1 }), /^unsupported GGUF version 1$/),
    c("version 2^32-1", buildGguf({ version: 0xffffffff }), /^unsupported GGUF version 4294967295$/),
    c("truncated header", base.subarray(0, 13), /^truncated GGUF file$/),
    c("truncated metadata", base.subarray(0, 60), /truncated GGUF file|exceeds the file size/),
    c("2^62 key/value pairs", buildGguf({ kvCount: 2n ** 62n }), /^metadata key count 4611686018427387904 exceeds the file size$/),
    c("2^64-1 key/value pairs", buildGguf({ kvCount: 2n ** 64n - 1n }), /^metadata key count \d+ exceeds the file size$/),
    c("100k key/value pairs", Buffer.concat([buildGguf({ kvCount: 100_000n, kvs: [], tensors: [] }), Buffer.alloc(1_400_000)]), /^too many metadata keys \(100000\)$/),
    c("2^62 tensors", buildGguf({ tensorCount: 2n ** 62n }), /^tensor count \d+ exceeds the file size$/),
    c("70k tensors", Buffer.concat([buildGguf({ tensorCount: 70_000n, tensors: [] }), Buffer.alloc(70_000 * 24)]), /^too many tensors \(70000\)$/),
    c("key of 2^40 bytes", buildGguf({ kvs: [Buffer.concat([u64(2n ** 40n), Buffer.from("k")])] }), /^string length 1099511627776 exceeds the file size$/),
    c("value of 2^40 bytes", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(8), u64(2n ** 40n)])] }), /^string length 1099511627776 exceeds the file size$/),
    c("unknown value type", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(13), u32(0)])] }), /^unknown metadata type 13$/),
    c("array of unknown type", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(9), u32(77), u64(1)])] }), /^unknown metadata type 77$/),
    c("array of 2^62 items", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(9), u32(4), u64(2n ** 62n)])] }), /^array length \d+ exceeds the file size$/),
    // Elements inside the reader's buffer are read by its synchronous path: the same refusals.
    c("string array, 2nd element of 2^40 bytes", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(9), u32(8), u64(2), gstr("a"), u64(2n ** 40n), Buffer.from("b")])] }), /^string length 1099511627776 exceeds the file size$/),
    c("array of arrays", buildGguf({ kvs: [Buffer.concat([gstr("k"), u32(9), u32(9), u64(1), u32(4), u64(1), u32(7)])] }), /^metadata arrays nested too deeply$/),
    c("duplicate key", buildGguf({ kvs: [...baseKvs(), kv.str("general.name", "again")] }), /^duplicate metadata key 'general.name'$/),
    c("alignment 0", buildGguf({ kvs: [kv.u32("general.alignment", 0)] }), /^general.alignment must be a power of two/),
    c("alignment 48", buildGguf({ kvs: [kv.u32("general.alignment", 48)], alignment: 48 }), /^general.alignment must be a power of two/),
    c("alignment as a string", buildGguf({ kvs: [kv.str("general.alignment", "32")] }), /^general.alignment must be a power of two/),
    c("tensor name of 2^40 bytes", patched(gstr("token_embd.weight"), 0, (f, at) => f.writeBigUInt64LE(2n ** 40n, at)), /^tensor name length 1099511627776 exceeds the file size$/),
    c("tensor name of 100 bytes", buildGguf({ tensors: withTensor(1, { name: "n".repeat(100) }) }), /^tensor name of 100 bytes exceeds the limit of 63$/),
    c("tensor with 5 dimensions", buildGguf({ tensors: withTensor(1, { dims: [64, 1, 1, 1, 1] }) }), /^tensor 'output_norm.weight' has 5 dimensions \(at most 4\)$/),
    c("tensor with 2^32-1 dimensions", patched(gstr("output_norm.weight"), 8 + 18, (f, at) => f.writeUInt32LE(0xffffffff, at)), /^tensor 'output_norm.weight' has 4294967295 dimensions/),
    c("zero dimension", buildGguf({ tensors: withTensor(0, { dims: [64, 0] }) }), /^tensor 'token_embd.weight' has a zero dimension$/),
    c("element count overflows int64", buildGguf({ tensors: withTensor(1, { dims: [2n ** 32n, 2n ** 32n, 2n ** 32n] }) }), /^tensor 'output_norm.weight' has too many elements$/),
    c("unknown tensor type 99", buildGguf({ tensors: withTensor(1, { type: 99 }) }), /^tensor 'output_norm.weight' has unknown type 99$/),
    c("removed tensor type Q4_2", buildGguf({ tensors: withTensor(1, { type: 4 }) }), /^tensor 'output_norm.weight' has unknown type 4$/),
    c("row not a multiple of the block", buildGguf({ tensors: withTensor(0, { dims: [33, 4] }) }), /^tensor 'token_embd.weight' of type Q8_0: first dimension 33 is not a multiple of its block size 32$/),
    c("misaligned data offset", buildGguf({ tensors: withTensor(1, { offset: 8n }) }), /^tensor 'output_norm.weight' data offset 8 is not aligned to 32 bytes$/),
    c("offset past the end", buildGguf({ tensors: withTensor(2, { offset: 2n ** 40n }) }), /^tensor 'output.weight' has data offset 1099511627776, expected \d+$/),
    c("offset 2^64-32", buildGguf({ tensors: withTensor(0, { offset: 2n ** 64n - 32n }) }), /^tensor 'token_embd.weight' has data offset \d+, expected 0$/),
    c("overlapping tensors", buildGguf({ tensors: withTensor(2, { offset: 0n }) }), /^tensor 'output.weight' has data offset 0, expected \d+$/),
    c("data truncated", base.subarray(0, base.length - 1), /^tensor 'output.weight' data lies outside the file/),
    c("no data at all", buildGguf({ dataBytes: 0 }), /data lies outside the file/),
    c("duplicate tensor name", buildGguf({ tensors: withTensor(2, { name: "output_norm.weight" }) }), /^duplicate tensor name 'output_norm.weight'$/),
  ];
}

/** The base file with bytes at `skip` past the first occurrence of `marker` rewritten by `write`. */
function patched(marker: Buffer, skip: number, write: (file: Buffer, at: number) => void): Buffer {
  const file = buildGguf();
  const at = file.indexOf(marker);
  if (at < 0) throw new Error("marker not found");
  write(file, at + skip);
  return file;
}

/** A structurally valid file (passes validation) that llama.cpp cannot load as a model. */
export function validButUnloadable(): Buffer {
  return buildGguf();
}
