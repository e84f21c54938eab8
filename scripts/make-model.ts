/**
 * `scripts/make-model`: writes a GGUF llama model with random weights and a real English tokenizer.
 * A thin CLI over src/gguf/make-model.ts; `--help` lists the flags.
 */
import { parseArgs } from "node:util";
import { makeModel, PRESETS, type MakeModelOptions, type PresetName } from "../src/gguf/make-model.js";
import { readTemplate, readTokenizer, vocabFile } from "../src/gguf/family-vocab.js";
import { ENCODER_USAGE, isEncoderArgs, runEncoder } from "./make-encoder.js";

const USAGE = `usage: make-model --out FILE [--preset NAME] [overrides]

Writes a GGUF v3 llama model with random weights (deterministic from --seed) and an English
SentencePiece-style vocabulary.

  --out FILE              where to write the model (required)
  --preset NAME           ${Object.keys(PRESETS).join(" | ")} (default: tiny)
  --embd N                embedding length
  --layers N              number of blocks
  --heads N               attention heads
  --kv-heads N            key/value heads (grouped-query attention)
  --ffn N                 feed-forward length
  --ctx N                 training context length
  --vocab N|FILE|FAMILY   vocabulary size; or a real tokenizer: every tokenizer.* key of a GGUF
                          file, or of llama.cpp's models/ggml-vocab-FAMILY.gguf (llama-bpe, qwen2,
                          phi-3, ...); the vocabulary size follows it
  --template FILE|NAME    Jinja chat template: a file, or llama.cpp's models/templates/NAME.jinja
  --llama-src DIR         llama.cpp's source (for FAMILY and NAME); default: the copy node-llama-cpp
                          ships (read with git, kept in ~/.cache/lmd/llama.cpp)
  --seed N                weight seed (default: 1)
  --identity-layers N     add N layers that compute nothing (same output as without them, more
                          compute): a target for measuring speculative decoding with this draft
  --type T                f32 | f16 | q8_0
  --chat-template T       chatml | chatml-tools | none
  --name NAME             general.name (default: the file name)
  -h, --help              show this help
`;

const NUMERIC = { embd: "embeddingLength", layers: "layers", heads: "heads", "kv-heads": "kvHeads", ffn: "feedForwardLength",
  ctx: "contextLength", vocab: "vocabSize", seed: "seed", "identity-layers": "identityLayers" } as const;

/** --vocab FILE|FAMILY and --template: a real family's tokenizer and chat template (src/gguf/family-vocab.ts). */
async function familyOptions(argv: string[], options: MakeModelOptions): Promise<MakeModelOptions> {
  const { values } = parseArgs({
    args: argv,
    strict: false,
    options: { vocab: { type: "string" }, template: { type: "string" }, "llama-src": { type: "string" } },
  });
  const src = typeof values["llama-src"] === "string" ? values["llama-src"] : undefined;
  const out = { ...options };
  if (typeof values.vocab === "string" && !/^\d+$/.test(values.vocab)) out.tokenizer = await readTokenizer(await vocabFile(values.vocab, src));
  if (typeof values.template === "string") out.template = await readTemplate(values.template, src);
  return out;
}

function parse(argv: string[]): { out: string; options: MakeModelOptions } | "help" {
  const str = { type: "string" } as const;
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: { out: str, preset: str, type: str, "chat-template": str, name: str, help: { type: "boolean", short: "h" }, template: str, "llama-src": str,
      ...Object.fromEntries(Object.keys(NUMERIC).map((k) => [k, str])) },
  });
  if (values.help) return "help";
  if (typeof values.out !== "string") throw new Error("--out FILE is required");
  const options: Record<string, unknown> = {};
  if (values.preset !== undefined) {
    if (!(values.preset in PRESETS)) throw new Error(`unknown preset '${values.preset}'`);
    options.preset = values.preset as PresetName;
  }
  for (const [flag, key] of Object.entries(NUMERIC)) {
    const raw = (values as Record<string, unknown>)[flag];
    if (raw === undefined || (flag === "vocab" && !/^\d+$/.test(String(raw)))) continue; // a tokenizer: familyOptions
    const n = Number(raw);
    if (!/^\d+$/.test(String(raw)) || !Number.isSafeInteger(n)) throw new Error(`--${flag} must be a non-negative integer`);
    options[key] = n;
  }
  if (values.type !== undefined) options.type = values.type;
  if (values["chat-template"] !== undefined) options.chatTemplate = values["chat-template"];
  if (values.name !== undefined) options.name = values.name;
  return { out: values.out, options: options as MakeModelOptions };
}

async function main(): Promise<void> {
  // BERT encoders and LoRA adapters: their own flags (scripts/make-encoder.ts).
  if (isEncoderArgs(process.argv.slice(2))) {
    try {
      process.stdout.write(`${await runEncoder(process.argv.slice(2))}\n`);
    } catch (err) {
      process.stderr.write(`make-model: ${(err as Error).message}\n${ENCODER_USAGE}`);
      process.exitCode = 2;
    }
    return;
  }
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`make-model: ${(err as Error).message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (parsed === "help") {
    process.stdout.write(USAGE + ENCODER_USAGE);
    return;
  }
  const started = performance.now();
  const r = await makeModel(parsed.out, await familyOptions(process.argv.slice(2), parsed.options));
  const s = r.spec;
  process.stdout.write(
    `wrote ${r.file}: ${(r.parameters / 1e6).toFixed(2)}M parameters, ${(r.bytes / 2 ** 20).toFixed(1)} MiB, ` +
    `${s.type}, vocab ${r.vocabSize}, ctx ${r.contextLength}, embd ${s.embeddingLength}, layers ${s.layers}, ` +
    `heads ${s.heads}/${s.kvHeads}, ffn ${s.feedForwardLength}, chat template ${s.chatTemplate}, seed ${r.seed} ` +
    `(${((performance.now() - started) / 1000).toFixed(2)} s)\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`make-model: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
