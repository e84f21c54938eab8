/**
 * Writes GGUF v3 llama models with random weights and a real English tokenizer: the models that
 * tests, benchmarks and the daemon's demo model run on. Deterministic from a seed: the same seed and
 * shape give a byte-identical file (written by write.ts).
 */
import { basename } from "node:path";
import { ALIGNMENT, FILE_TYPE, GGML_TYPE, type MetaValue, type TensorPlan, type WeightType } from "./encode.js";
import { buildSpmVocab, TokenType, type SpmVocab } from "./spm-vocab.js";
import { writeGguf } from "./write.js";

export type { WeightType };

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
  if (textOnly)
    tensors.find((t) => t.name === "output.weight")!.zeroRows = vocab.types.flatMap((type, id) =>
      type === TokenType.normal || type === TokenType.byte ? [] : [id],
    );
  let kv = metadata({ ...spec, layers: spec.layers + identityLayers }, vocab, name ?? basename(file).replace(/\.[^.]*$/, ""), seed);
  // A family's tokenizer replaces every generated tokenizer key; a template replaces any chat template.
  if (tokenizer) kv = [...kv.filter(([k]) => !k.startsWith("tokenizer.")), ...tokenizer.kv];
  if (template !== undefined) kv = [...kv.filter(([k]) => k !== "tokenizer.chat_template"), ["tokenizer.chat_template", { t: "str", v: template }]];
  const { bytes, parameters } = await writeGguf(file, kv, tensors, seed);
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
  if (s.chatTemplate !== "chatml" && s.chatTemplate !== "chatml-tools" && s.chatTemplate !== "none")
    throw new RangeError(`unknown chat template '${s.chatTemplate}'`);
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
