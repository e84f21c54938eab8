/**
 * Whether a LoRA adapter GGUF can apply to a base model: the checks llama.cpp's
 * `llama_adapter_lora_init_impl` (src/llama-adapter.cpp) makes when the runner loads it, made in
 * the parent at create time from the bounded reader's metadata, so that an adapter that cannot
 * apply is a 400 at `/api/create` instead of a model that fails to load later.
 */
import type { GgufMetadata, GgufTensorShape } from "./gguf.js";

/** Why `adapter` cannot apply to `base`, or undefined when it can. Both must be read with tensors. */
export function loraMismatch(adapter: GgufMetadata, base: GgufMetadata): string | undefined {
  const m = adapter.metadata;
  if (m["general.type"] !== "adapter") return `not a LoRA adapter (general.type is ${describe(m["general.type"])}, expected 'adapter')`;
  if (m["adapter.type"] !== "lora") return `unsupported adapter type ${describe(m["adapter.type"])} (only 'lora' adapters apply)`;
  const arch = m["general.architecture"];
  const baseArch = base.metadata["general.architecture"];
  if (arch !== baseArch) return `adapter architecture ${describe(arch)} does not match the model's ${describe(baseArch)}`;
  const pairs = new Map<string, { a?: GgufTensorShape; b?: GgufTensorShape }>();
  for (const t of adapter.tensors ?? []) {
    const suffix = /\.lora_([ab])$/.exec(t.name);
    if (!suffix) {
      if (t.name.endsWith("_norm.weight")) continue; // llama.cpp skips these
      return `tensor '${t.name}' is not a lora_a/lora_b tensor`;
    }
    const name = t.name.slice(0, -".lora_a".length);
    const pair = pairs.get(name) ?? {};
    pair[suffix[1] as "a" | "b"] = t;
    pairs.set(name, pair);
  }
  if (pairs.size === 0) return "it holds no LoRA tensors";
  const baseTensors = new Map((base.tensors ?? []).map((t) => [t.name, t.dims]));
  for (const [name, { a, b }] of pairs) {
    if (!a || !b) return `tensor pair for '${name}' is missing its lora_${a ? "b" : "a"}`;
    const w = baseTensors.get(name);
    if (!w) return `tensor '${name}' does not exist in the model`;
    const [a0, a1] = a.dims;
    const [b0, b1] = b.dims;
    // token_embd is looked up by row, so its pair is stored the other way round (llm_build_inp_embd).
    const fits = name.endsWith("token_embd.weight") ? w[0] === b1 && w[1] === a1 : w[0] === a0 && w[1] === b1 && a1 === b0;
    if (!fits)
      return `tensor '${name}' has shape [${w.join(", ")}] in the model, which lora_a [${a.dims.join(", ")}] and lora_b [${b.dims.join(", ")}] do not fit`;
  }
  return undefined;
}

function describe(v: unknown): string {
  if (v === undefined) return "missing";
  const text = typeof v === "string" ? v : String(v);
  return `'${text.length > 40 ? `${text.slice(0, 37)}...` : text}'`;
}
