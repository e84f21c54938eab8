/**
 * Writes GGUF v3 llama models with random weights and a real English tokenizer: the models that
 * tests, benchmarks and the daemon's demo model run on. Deterministic from a seed; tensors are
 * generated and written in chunks, so even the 1B preset never sits in memory.
 */
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { basename } from "node:path";
import { buildSpmVocab, TokenType, type SpmVocab } from "./vocab-words.js";

/** Tensor storage types that can be written. */
export type WeightType = "f32" | "f16" | "q8_0";
/** Chat templates that can be embedded. */
export type ChatTemplateName = "chatml" | "chatml-tools" | "none";

/** The shape and format of a generated model. */
export interface ModelSpec {
  embeddingLength: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForwardLength: number;
  contextLength: number;
  vocabSize: number;
  type: WeightType;
  chatTemplate: ChatTemplateName;
}

export type PresetName = "tiny" | "demo" | "small" | "bench-100m" | "bench-1b";

/** Options of {@link makeModel}: a preset (default `tiny`) with any field overridden. */
export interface MakeModelOptions extends Partial<ModelSpec> {
  preset?: PresetName;
  /** PRNG seed for the weights (default 1). Same seed and shape → byte-identical file. */
  seed?: number;
  /** `general.name` (default: the file name without extension). */
  name?: string;
  /**
   * Extra layers after the model's own that compute nothing: their attention output and FFN down
   * projections are zero, so each adds 0 to the residual stream, while their other matrices are
   * random and cost the same compute as a real layer. A model with `identityLayers: k` computes
   * exactly what the same seed and shape without them computes — the ideal draft/target pair for
   * measuring speculative decoding's machinery (every draft token is accepted at temperature 0).
   */
  identityLayers?: number;
  /** A real family's tokenizer (src/gguf/family-vocab.ts) in place of the generated vocabulary; sets `vocabSize`. */
  tokenizer?: { kv: [string, MetaValue][]; size: number };
  /** A Jinja chat template (`tokenizer.chat_template`), replacing `chatTemplate` and the tokenizer's own. */
  template?: string;
  /**
   * The output matrix's rows of every token that is not text (unknown, control — beginning and end of
   * sequence, chat markers —, unused) are zero, so their logits are always 0 while the largest of the
   * others is several standard deviations above: greedy decoding (temperature 0) never ends by itself
   * and writes only text. For tests that need exactly `num_predict` tokens of text: with random
   * weights, where a greedy generation meets end-of-sequence depends on the CPU's kernels (AVX2 or
   * AMX round differently). Sampling at a temperature can still pick those tokens, as rarely as any
   * one token. Every other value is the same as without it. Not with `tokenizer`.
   */
  textOnly?: boolean;
}

export interface MakeModelResult {
  file: string;
  bytes: number;
  parameters: number;
  vocabSize: number;
  contextLength: number;
  spec: ModelSpec;
  seed: number;
}

const shape = (embd: number, layers: number, heads: number, kvHeads: number, ffn: number) =>
  ({ embeddingLength: embd, layers, heads, kvHeads, feedForwardLength: ffn });

/** Preset shapes; parameter counts are for the preset's vocabulary. */
export const PRESETS: Readonly<Record<PresetName, Readonly<ModelSpec>>> = {
  /** ~0.6M params, ~0.7 MB: for tests. */
  tiny: { ...shape(64, 2, 4, 4, 128), contextLength: 2048, vocabSize: 4096, type: "q8_0", chatTemplate: "none" },
  /** ~11M params, ~12 MB: the demo model the daemon writes into an empty store. */
  demo: { ...shape(256, 8, 8, 4, 768), contextLength: 4096, vocabSize: 8192, type: "q8_0", chatTemplate: "chatml" },
  /** ~42M params. */
  small: { ...shape(512, 8, 8, 8, 1408), contextLength: 4096, vocabSize: 16000, type: "q8_0", chatTemplate: "chatml" },
  /** ~100M params. */
  "bench-100m": { ...shape(768, 8, 12, 4, 2048), contextLength: 4096, vocabSize: 32000, type: "q8_0", chatTemplate: "chatml" },
  /** ~1.03B params. */
  "bench-1b": { ...shape(2048, 20, 32, 8, 5632), contextLength: 4096, vocabSize: 32000, type: "q8_0", chatTemplate: "chatml" },
};

/** The standard ChatML template (as Qwen2 and other ChatML models ship it). */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * ChatML that shows tools, as tool-calling chat templates do (Qwen 2.5's layout, shortened): the tools
 * in a system turn, each call as `<tool_call>{"name": …, "arguments": …}</tool_call>` and each result
 * as a `<tool_response>` in a user turn. A model with it has Ollama's `tools` capability.
 */
export const CHATML_TOOLS_TEMPLATE =
  "{%- if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}" +
  "You may call these tools:\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n" +
  'Answer a call as <tool_call>{"name": <name>, "arguments": <arguments>}</tool_call><|im_end|>\n' +
  "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}" +
  "{% for message in messages %}{% if message.role == 'system' %}" +
  "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{% if message.content %}{{ message.content }}{% endif %}" +
  '{% for call in message.tool_calls or [] %}<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>{% endfor %}<|im_end|>\n' +
  "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>{{ message.content }}</tool_response><|im_end|>\n" +
  "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const ALIGNMENT = 32;
const STD = 0.02;
const GGML_TYPE = { f32: 0, f16: 1, q8_0: 8 } as const;
const FILE_TYPE = { f32: 0, f16: 1, q8_0: 7 } as const;

interface TensorPlan {
  name: string;
  dims: number[];
  type: WeightType;
  fill: "random" | "ones" | "zeros";
  /** Rows (dims[0] consecutive values each) written as zeros whatever the fill: textOnly. */
  zeroRows?: number[];
  /** Index for the per-tensor seed (make-model: the position in the model without identity layers; other writers use the position). */
  seedIndex?: number;
}

let tmpCounter = 0;

/** Writes a model to `file` (atomically: a temporary file renamed into place). */
export async function makeModel(file: string, options: MakeModelOptions = {}): Promise<MakeModelResult> {
  const { preset = "tiny", seed = 1, name, identityLayers = 0, tokenizer, template, textOnly = false, ...overrides } = options;
  const base = PRESETS[preset];
  if (!base) throw new RangeError(`unknown preset '${String(preset)}'`);
  const spec: ModelSpec = { ...base, ...definedOnly(overrides), ...(tokenizer ? { vocabSize: tokenizer.size } : {}) };
  // Overriding only `heads` keeps the preset's grouping when it still divides, else uses plain MHA.
  if (overrides.kvHeads === undefined && spec.heads % spec.kvHeads !== 0) spec.kvHeads = spec.heads;
  validate(spec);
  if (!Number.isInteger(identityLayers) || identityLayers < 0) throw new RangeError("identityLayers must be a non-negative integer");
  if (textOnly && tokenizer) throw new RangeError("textOnly works with the generated vocabulary, not a family's tokenizer");
  // With a family's tokenizer the generated one is only a placeholder (its keys are all replaced).
  const vocab = buildSpmVocab(tokenizer ? PRESETS.tiny.vocabSize : spec.vocabSize, spec.chatTemplate !== "none" ? ["<|im_start|>", "<|im_end|>"] : []);
  if (spec.chatTemplate !== "none") vocab.eosId = vocab.tokens.indexOf("<|im_end|>");
  const tensors = planTensors(spec, identityLayers);
  if (textOnly) tensors.find((t) => t.name === "output.weight")!.zeroRows = vocab.types.flatMap((type, id) => (type === TokenType.normal || type === TokenType.byte ? [] : [id]));
  let kv = metadata({ ...spec, layers: spec.layers + identityLayers }, vocab, name ?? basename(file).replace(/\.[^.]*$/, ""), seed);
  // A family's tokenizer replaces every generated tokenizer key; a template replaces any chat template.
  if (tokenizer) kv = [...kv.filter(([k]) => !k.startsWith("tokenizer.")), ...tokenizer.kv];
  if (template !== undefined) kv = [...kv.filter(([k]) => k !== "tokenizer.chat_template"), ["tokenizer.chat_template", { t: "str", v: template }]];
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
  const parameters = tensors.reduce((n, t) => n + count(t.dims), 0);
  const bytes = header.length + tensors.reduce((n, t) => n + padded(tensorBytes(t)), 0);
  return { file, bytes, parameters, vocabSize: spec.vocabSize, contextLength: spec.contextLength, spec, seed };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function validate(s: ModelSpec): void {
  const positive = ["embeddingLength", "layers", "heads", "kvHeads", "feedForwardLength", "contextLength", "vocabSize"] as const;
  for (const k of positive) if (!Number.isInteger(s[k]) || s[k] < 1) throw new RangeError(`${k} must be a positive integer`);
  if (s.embeddingLength % s.heads !== 0) throw new RangeError("embeddingLength must be a multiple of heads");
  if (s.heads % s.kvHeads !== 0) throw new RangeError("heads must be a multiple of kvHeads");
  if ((s.embeddingLength / s.heads) % 2 !== 0) throw new RangeError("the head size (embeddingLength / heads) must be even");
  if (!(s.type in GGML_TYPE)) throw new RangeError(`unknown type '${s.type}'`);
  if (s.chatTemplate !== "chatml" && s.chatTemplate !== "chatml-tools" && s.chatTemplate !== "none") throw new RangeError(`unknown chat template '${s.chatTemplate}'`);
  if (s.type === "q8_0" && (s.embeddingLength % 32 !== 0 || s.feedForwardLength % 32 !== 0))
    throw new RangeError("q8_0 needs embeddingLength and feedForwardLength to be multiples of 32");
}

/** The tensors of a llama model, in GGML dimension order (innermost first). */
function planTensors(s: ModelSpec, identityLayers = 0): TensorPlan[] {
  const e = s.embeddingLength;
  const kv = (e / s.heads) * s.kvHeads;
  let next = 0;
  const m = (n: string, dims: number[], fill: TensorPlan["fill"] = "random"): TensorPlan => ({ name: n, dims, type: s.type, fill, seedIndex: next++ });
  const norm = (n: string): TensorPlan => ({ name: n, dims: [e], type: "f32", fill: "ones", seedIndex: next++ });
  const layer = (i: number, zeroOutputs: boolean) => {
    const b = `blk.${i}.`;
    const out = zeroOutputs ? "zeros" : "random";
    return [norm(`${b}attn_norm.weight`), m(`${b}attn_q.weight`, [e, e]), m(`${b}attn_k.weight`, [e, kv]),
      m(`${b}attn_v.weight`, [e, kv]), m(`${b}attn_output.weight`, [e, e], out), norm(`${b}ffn_norm.weight`),
      m(`${b}ffn_gate.weight`, [e, s.feedForwardLength]), m(`${b}ffn_up.weight`, [e, s.feedForwardLength]),
      m(`${b}ffn_down.weight`, [s.feedForwardLength, e], out)];
  };
  const out = [m("token_embd.weight", [e, s.vocabSize])];
  for (let i = 0; i < s.layers; i++) out.push(...layer(i, false));
  const tail = [norm("output_norm.weight"), m("output.weight", [e, s.vocabSize])];
  // Identity layers come after the real ones; their seeds follow the tail's, so every tensor the
  // model shares with its identity-free twin has the same values.
  for (let i = 0; i < identityLayers; i++) out.push(...layer(s.layers + i, true));
  return [...out, ...tail];
}

type MetaValue =
  | { t: "str"; v: string } | { t: "u32"; v: number } | { t: "f32"; v: number } | { t: "bool"; v: boolean }
  | { t: "strs"; v: string[] } | { t: "f32s"; v: number[] } | { t: "i32s"; v: number[] };

function metadata(s: ModelSpec, vocab: SpmVocab, name: string, seed: number): [string, MetaValue][] {
  const u32 = (v: number): MetaValue => ({ t: "u32", v });
  const kv: [string, MetaValue][] = [
    ["general.architecture", { t: "str", v: "llama" }],
    ["general.name", { t: "str", v: name }],
    ["general.description", { t: "str", v: `lmd make-model: random weights, seed ${seed}` }],
    ["general.file_type", u32(FILE_TYPE[s.type])],
    ["general.quantization_version", u32(2)],
    ["general.alignment", u32(ALIGNMENT)],
    ["llama.context_length", u32(s.contextLength)],
    ["llama.embedding_length", u32(s.embeddingLength)],
    ["llama.block_count", u32(s.layers)],
    ["llama.feed_forward_length", u32(s.feedForwardLength)],
    ["llama.attention.head_count", u32(s.heads)],
    ["llama.attention.head_count_kv", u32(s.kvHeads)],
    ["llama.rope.dimension_count", u32(s.embeddingLength / s.heads)],
    ["llama.attention.layer_norm_rms_epsilon", { t: "f32", v: 1e-5 }],
    ["llama.rope.freq_base", { t: "f32", v: 10000 }],
    ["llama.vocab_size", u32(s.vocabSize)],
    ["tokenizer.ggml.model", { t: "str", v: "llama" }],
    ["tokenizer.ggml.tokens", { t: "strs", v: vocab.tokens }],
    ["tokenizer.ggml.scores", { t: "f32s", v: vocab.scores }],
    ["tokenizer.ggml.token_type", { t: "i32s", v: vocab.types }],
    ["tokenizer.ggml.bos_token_id", u32(vocab.bosId)],
    ["tokenizer.ggml.eos_token_id", u32(vocab.eosId)],
    ["tokenizer.ggml.unknown_token_id", u32(vocab.unkId)],
    ["tokenizer.ggml.add_bos_token", { t: "bool", v: true }],
    ["tokenizer.ggml.add_eos_token", { t: "bool", v: false }],
  ];
  if (s.chatTemplate !== "none") kv.push(["tokenizer.chat_template", { t: "str", v: s.chatTemplate === "chatml" ? CHATML_TEMPLATE : CHATML_TOOLS_TEMPLATE }]);
  return kv;
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
      case "f32s": { const b = Buffer.alloc(4 * m.v.length); m.v.forEach((x, i) => b.writeFloatLE(x, 4 * i)); this.u32(9); this.u32(6); this.u64(m.v.length); this.parts.push(b); break; }
      case "i32s": array(5, m.v, (x) => this.i32(x)); break;
    }
  }
}

function encodeHeader(kv: [string, MetaValue][], tensors: TensorPlan[]): Buffer {
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

const count = (dims: number[]): number => dims.reduce((a, b) => a * b, 1);
const padded = (n: number): number => Math.ceil(n / ALIGNMENT) * ALIGNMENT;
const bytesFor = (type: WeightType, n: number): number => (type === "f32" ? 4 * n : type === "f16" ? 2 * n : (n / 32) * 34);
const tensorBytes = (t: TensorPlan): number => bytesFor(t.type, count(t.dims));

/** Elements generated per chunk: a multiple of the Q8_0 block size, ~4 MB of f32. */
const CHUNK = 1 << 20;

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

function encodeValues(type: WeightType, values: Float32Array, out: Buffer): number {
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

// The GGUF writing blocks, shared with the other writers (make-bert.ts, make-lora.ts via write.ts).
export { ALIGNMENT, FILE_TYPE, encodeHeader, writeTensor, mix, count, padded, tensorBytes };
export type { MetaValue, TensorPlan };
