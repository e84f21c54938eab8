/**
 * make-model's encoder and adapter modes (scripts/make-encoder.ts): `--arch bert` writes llama.cpp's
 * BERT layout with the bge vocabulary (embedding or reranker), `--lora-for` an adapter; the
 * metadata is read back with node-llama-cpp's own GGUF reader.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { readGgufFileInfo } from "node-llama-cpp";
import t from "tap";
import { llamaSrc } from "../helpers/llama-src.js";
import { testGguf } from "../helpers/models.js";

const script = fileURLToPath(new URL("../../scripts/make-model.ts", import.meta.url));
const cli = (...args: string[]) => promisify(execFile)(process.execPath, [...process.execArgv, script, ...args]);

t.test("--arch bert and --lora-for", async (t) => {
  const dir = t.testdir();
  const vocab = join(await llamaSrc(), "models", "ggml-vocab-bert-bge.gguf");
  t.match((await cli("--help")).stdout, /--arch bert --vocab-file VOCAB /);
  await t.rejects(cli("--out", join(dir, "x.gguf"), "--arch", "bert"), { code: 2, stderr: /--arch bert needs --vocab-file/ });
  await t.rejects(cli("--out", join(dir, "x.gguf"), "--arch", "gpt2", "--vocab-file", vocab), { code: 2, stderr: /unknown --arch 'gpt2'/ });

  const rr = join(dir, "rr.gguf");
  t.match(
    (await cli("--out", rr, "--arch", "bert", "--vocab-file", vocab, "--pooling", "rank", "--layers", "1", "--seed", "3")).stdout,
    /wrote .*rr\.gguf: bert reranker, .*vocab 30522, embd 64/,
  );
  const info = await readGgufFileInfo(rr, { logWarnings: false });
  const md = info.metadata as unknown as { bert: Record<string, unknown>; tokenizer: { ggml: Record<string, unknown> } };
  t.match(md.bert, { block_count: 1, pooling_type: 4, attention: { causal: false } });
  t.equal(md.tokenizer.ggml.model, "bert");
  t.equal(md.tokenizer.ggml.pre, "bert-bge", "the vocabulary's pre-tokenizer is copied");
  const names = (info.fullTensorInfo ?? []).map((x) => x.name);
  for (const n of [
    "token_types.weight",
    "position_embd.weight",
    "token_embd_norm.bias",
    "blk.0.attn_output_norm.weight",
    "blk.0.layer_output_norm.bias",
    "cls.weight",
    "cls.output.weight",
    "cls.output.bias",
  ])
    t.ok(names.includes(n), n);

  const lora = join(dir, "lora.gguf");
  t.match(
    (await cli("--out", lora, "--lora-for", await testGguf(), "--rank", "2")).stdout,
    /wrote .*lora\.gguf: LoRA adapter for llama, 14 tensors, rank 2, alpha 32/,
  );
  const la = await readGgufFileInfo(lora, { logWarnings: false });
  t.match(la.metadata, { general: { type: "adapter", architecture: "llama" }, adapter: { type: "lora", lora: { alpha: 32 } } });
});

t.test("--vocab-file bert-bge: llama.cpp's vocabulary read from node-llama-cpp's bundled source, no checkout given", async (t) => {
  const dir = t.testdir();
  // A private cache: the first use clones the bundle (bare) and reads the one file out of it.
  const env = { ...process.env, XDG_CACHE_HOME: join(dir, "cache") };
  const run = (...args: string[]) => promisify(execFile)(process.execPath, [...process.execArgv, script, ...args], { env });
  const rr = join(dir, "rr.gguf");
  t.match(
    (await run("--out", rr, "--arch", "bert", "--vocab-file", "bert-bge", "--pooling", "rank", "--layers", "1")).stdout,
    /wrote .*rr\.gguf: bert reranker, .*vocab 30522/,
  );
  const cached = join(dir, "cache", "lmd", "llama.cpp", "files", "models", "ggml-vocab-bert-bge.gguf");
  t.same(await readFile(cached), await readFile(join(await llamaSrc(), "models", "ggml-vocab-bert-bge.gguf")), "the very file of llama.cpp's source");
  const info = await readGgufFileInfo(rr, { logWarnings: false });
  t.equal((info.metadata as unknown as { tokenizer: { ggml: Record<string, unknown> } }).tokenizer.ggml.pre, "bert-bge");
  t.match(
    (await run("--out", join(dir, "again.gguf"), "--arch", "bert", "--vocab-file", "ggml-vocab-bert-bge.gguf")).stdout,
    /vocab 30522/,
    "the file's own name works too",
  );
  await t.rejects(run("--out", join(dir, "x.gguf"), "--arch", "bert", "--vocab-file", "no-such-family"), {
    code: 2,
    stderr: /llama\.cpp's source has no models\/ggml-vocab-no-such-family\.gguf/,
  });
});
