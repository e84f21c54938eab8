/**
 * loraMismatch: llama.cpp's adapter rules (src/llama-adapter.cpp), checked in the parent at create
 * time, on adapters make-model writes and on hand-made metadata for the cases it never writes.
 */
import t from "tap";
import { readGgufMetadata, type GgufMetadata, type GgufTensorShape } from "../../src/gguf/gguf.js";
import { loraMismatch } from "../../src/gguf/lora-check.js";
import { makeLora } from "../../src/gguf/make-lora.js";
import { testGguf } from "../helpers/models.js";

const base = await readGgufMetadata(await testGguf(), {}, { tensors: true });
const adapter = (tensors: GgufTensorShape[], metadata: Record<string, unknown> = {}): GgufMetadata =>
  ({ version: 3, tensorCount: tensors.length, arrayLengths: {}, tensors,
    metadata: { "general.type": "adapter", "adapter.type": "lora", "general.architecture": "llama", ...metadata } }) as GgufMetadata;

t.test("an adapter make-model writes for the base fits it", async (t) => {
  const file = `${t.testdir()}/a.gguf`;
  const made = await makeLora(file, { base: await testGguf(), rank: 4 });
  t.equal(made.adapted.length, 2 * 7, "every blk matrix of the 2-layer model");
  const meta = await readGgufMetadata(file, {}, { tensors: true });
  t.equal(meta.metadata["adapter.lora.alpha"], 64);
  t.same(meta.tensors?.find((x) => x.name === "blk.0.ffn_down.weight.lora_a")?.dims, [128, 4], "lora_a is [n_in, r]");
  t.same(meta.tensors?.find((x) => x.name === "blk.0.ffn_down.weight.lora_b")?.dims, [4, 64], "lora_b is [r, n_out]");
  t.equal(loraMismatch(meta, base), undefined);
});

t.test("what llama.cpp refuses", async (t) => {
  const q = (a: number[], b: number[]): GgufTensorShape[] => [{ name: "blk.0.attn_q.weight.lora_a", dims: a }, { name: "blk.0.attn_q.weight.lora_b", dims: b }];
  t.equal(loraMismatch(adapter(q([64, 8], [8, 64])), base), undefined, "a fitting pair");
  t.equal(loraMismatch(adapter(q([64, 8], [8, 64]), { "general.type": "model" }), base), "not a LoRA adapter (general.type is 'model', expected 'adapter')");
  t.equal(
    loraMismatch(adapter(q([64, 8], [8, 64]), { "adapter.type": "control_vector" }), base),
    "unsupported adapter type 'control_vector' (only 'lora' adapters apply)",
  );
  t.equal(
    loraMismatch(adapter(q([64, 8], [8, 64]), { "general.architecture": "qwen2" }), base),
    "adapter architecture 'qwen2' does not match the model's 'llama'",
  );
  t.equal(loraMismatch(adapter([]), base), "it holds no LoRA tensors");
  t.equal(loraMismatch(adapter([{ name: "blk.0.attn_q.weight", dims: [64, 64] }]), base), "tensor 'blk.0.attn_q.weight' is not a lora_a/lora_b tensor");
  t.equal(
    loraMismatch(adapter([{ name: "blk.0.attn_norm.weight", dims: [64] }, ...q([64, 8], [8, 64])]), base),
    undefined,
    "norm vectors are skipped, as llama.cpp does",
  );
  t.equal(loraMismatch(adapter(q([64, 8], [8, 64]).slice(0, 1)), base), "tensor pair for 'blk.0.attn_q.weight' is missing its lora_b");
  t.equal(
    loraMismatch(
      adapter([
        { name: "blk.9.attn_q.weight.lora_a", dims: [64, 8] },
        { name: "blk.9.attn_q.weight.lora_b", dims: [8, 64] },
      ]),
      base,
    ),
    "tensor 'blk.9.attn_q.weight' does not exist in the model",
  );
  t.match(
    loraMismatch(adapter(q([64, 8], [4, 64])), base),
    /^tensor 'blk\.0\.attn_q\.weight' has shape \[64, 64\] in the model, which lora_a \[64, 8\] and lora_b \[4, 64\] do not fit$/,
    "rank of a and b differ",
  );
  const embd = (a: number[], b: number[]) => adapter([{ name: "token_embd.weight.lora_a", dims: a }, { name: "token_embd.weight.lora_b", dims: b }]);
  t.equal(loraMismatch(embd([8, 4096], [8, 64]), base), undefined, "token_embd's pair is stored the other way round");
  t.match(loraMismatch(embd([64, 8], [8, 4096]), base), /^tensor 'token_embd\.weight' has shape/);
});
