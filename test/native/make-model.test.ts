import t from "tap";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { join } from "node:path";
import {
  ChatMLChatWrapper,
  getLlama,
  LlamaCompletion,
  LlamaLogLevel,
  readGgufFileInfo,
  resolveChatWrapper,
  type Llama,
  type LlamaModel,
} from "node-llama-cpp";
import { f32ToF16, quantizeQ8_0 } from "../../src/gguf/encode.js";
import { CHATML_TEMPLATE, makeModel, PRESETS, type MakeModelOptions } from "../../src/gguf/make-model.js";
import { buildSpmVocab } from "../../src/gguf/spm-vocab.js";
import { VOCAB_WORDS } from "../../src/gguf/vocab-words.js";

const SENTENCE = "Hello world, the cat sat on the mat.";

let llama: Llama | undefined;
async function load(file: string): Promise<LlamaModel> {
  llama ??= await getLlama({ gpu: false, maxThreads: 2, build: "never", logLevel: LlamaLogLevel.error });
  return llama.loadModel({ modelPath: file });
}
t.teardown(async () => { await llama?.dispose(); });

async function greedy(model: LlamaModel, prompt: string): Promise<string> {
  const context = await model.createContext({ contextSize: 512, threads: 2 });
  try {
    const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
    return await completion.generateCompletion(prompt, { maxTokens: 8, temperature: 0 });
  } finally {
    await context.dispose();
  }
}

t.test("f16 and q8_0 encodings follow ggml", async (t) => {
  t.equal(f32ToF16(1), 0x3c00);
  t.equal(f32ToF16(-2), 0xc000);
  t.equal(f32ToF16(65504), 0x7bff);
  t.equal(f32ToF16(1e6), 0x7c00, "overflow is infinity");
  t.equal(f32ToF16(2 ** -24), 0x0001, "smallest subnormal");
  t.equal(f32ToF16(1 + 2 ** -11), 0x3c00, "a tie rounds to even");
  const values = Float32Array.from({ length: 32 }, (_, i) => (i - 16) / 8); // -2 .. 1.875
  const out = Buffer.alloc(34);
  t.equal(quantizeQ8_0(values, out), 34);
  t.equal(out.readUInt16LE(0), f32ToF16(2 / 127), "scale is max|x| / 127");
  t.equal(out.readInt8(2), -127);
  t.equal(out.readInt8(2 + 16), 0);
  t.equal(out.readInt8(2 + 20), 32, "0.5 / (2/127) = 31.75 rounds to 32");
});

t.test("the vocabulary is prefix-closed and sized exactly", async (t) => {
  for (const size of [512, 4096, 32000]) {
    const v = buildSpmVocab(size, ["<|im_start|>", "<|im_end|>"]);
    t.equal(v.tokens.length, size);
    t.equal(v.scores.length, size);
    t.equal(v.types.length, size);
    t.equal(new Set(v.tokens).size, size, "no duplicate tokens");
    const set = new Set(v.tokens);
    const missing = v.tokens.filter((tok, i) => v.types[i] === 1 && tok.length > 1 && !set.has(tok.slice(0, -1)));
    t.same(missing, [], `every normal token's prefix is in the ${size} vocabulary`);
  }
  const big = new Set(buildSpmVocab(32000).tokens);
  t.ok(VOCAB_WORDS.length > 2500);
  t.same(VOCAB_WORDS.filter((w) => !big.has(`\u2581${w}`)), [], "every listed word is one token at 32k");
});

t.test("a tiny model loads, tokenizes into words and round-trips", async (t) => {
  const dir = t.testdir();
  const r = await makeModel(join(dir, "tiny.gguf"));
  t.match(r, { bytes: Number, parameters: Number, vocabSize: PRESETS.tiny.vocabSize, contextLength: 2048 });
  t.equal((await readFile(r.file)).length, r.bytes, "reported size is the file size");
  const model = await load(r.file);
  t.teardown(() => model.dispose());
  t.equal(model.tokens.bos, 1);
  t.equal(model.tokens.eos, 2);
  const tokens = model.tokenize(SENTENCE);
  t.equal(tokens.length, 10, "Hello|world|,|the|cat|sat|on|the|mat|.");
  t.equal(model.detokenize(tokens), SENTENCE);
  const text = "Numbers 42 and 3.14, newlines\n\ttabs, café and emoji 🎉 survive: [x] {y} <z>!";
  t.equal(model.detokenize(model.tokenize(text)), text, "byte fallback covers everything else");
  t.ok(model.tokenize(text).length < text.length);

  const first = await greedy(model, "The cat");
  t.ok(first.length > 0, "generates text");
  t.equal(await greedy(model, "The cat"), first, "greedy generation is deterministic");
});

t.test("the seed decides the bytes", async (t) => {
  const dir = t.testdir();
  const write = (name: string, seed: number) => makeModel(join(dir, name), { seed, name: "same" }).then((r) => readFile(r.file));
  const [a, b, c] = await Promise.all([write("a.gguf", 7), write("b.gguf", 7), write("c.gguf", 8)]);
  t.ok(a.equals(b), "same seed, same bytes");
  t.notOk(a.equals(c), "another seed, other bytes");
  t.equal(a.length, c.length);
});

t.test("textOnly zeroes the output rows of the tokens that are not text, and nothing else", async (t) => {
  const dir = t.testdir();
  const write = (name: string, textOnly: boolean) => makeModel(join(dir, name), { seed: 3, name: "same", textOnly }).then((r) => r.file);
  const [plainFile, textFile] = await Promise.all([write("plain.gguf", false), write("text.gguf", true)]);
  const [plain, text] = await Promise.all([readFile(plainFile), readFile(textFile)]);
  const info = await readGgufFileInfo(textFile);
  const output = info.fullTensorInfo!.find((x) => x.name === "output.weight")!;
  const types = info.metadata.tokenizer!.ggml.token_type as number[];
  const notText = types.flatMap((type, id) => (type === 1 || type === 6 ? [] : [id])); // normal, byte
  t.ok(notText.includes(Number(info.metadata.tokenizer!.ggml.eos_token_id)), "end-of-sequence is among them");
  const rowBytes = (PRESETS.tiny.embeddingLength / 32) * 34; // q8_0: blocks of 32 values in 34 bytes
  const rows = notText.map((id) => Number(output.fileOffset) + id * rowBytes);
  t.ok(rows.every((at) => text.subarray(at, at + rowBytes).every((b) => b === 0)), `their ${rows.length} rows read as zeros`);
  t.ok(rows.every((at) => !plain.subarray(at, at + rowBytes).every((b) => b === 0)), "they do not without the option");
  const differing = [...plain.keys()].filter((i) => plain[i] !== text[i]);
  t.ok(
    plain.length === text.length && differing.length > 0 && differing.every((i) => rows.some((at) => i >= at && i < at + rowBytes)),
    `only those rows differ (${differing.length} bytes)`,
  );
  await t.rejects(makeModel(join(dir, "x.gguf"), { textOnly: true, tokenizer: { kv: [], size: 10 } }), /textOnly/);
});

t.test("f32, f16 and q8_0 models all load and run", async (t) => {
  const dir = t.testdir();
  const sizes: Record<string, number> = {};
  for (const type of ["f32", "f16", "q8_0"] as const) {
    const r = await makeModel(join(dir, `${type}.gguf`), { type, layers: 1 });
    sizes[type] = r.bytes;
    const model = await load(r.file);
    t.equal(model.detokenize(model.tokenize(SENTENCE)), SENTENCE, `${type} round-trips`);
    t.ok((await greedy(model, "Hello")).length > 0, `${type} generates`);
    await model.dispose();
  }
  t.ok(sizes.f32! > sizes.f16! && sizes.f16! > sizes.q8_0!, "smaller types give smaller files");
});

t.test("metadata reads back as written, chatml picks the ChatML wrapper", async (t) => {
  const dir = t.testdir();
  const options: MakeModelOptions = { chatTemplate: "chatml", seed: 3, vocabSize: 3000, contextLength: 1024, kvHeads: 2, name: "chatty" };
  const r = await makeModel(join(dir, "chat.gguf"), options);
  const info = await readGgufFileInfo(r.file, { logWarnings: false });
  t.equal(info.version, 3);
  const md = info.metadata;
  t.match(md.general, { architecture: "llama", name: "chatty", file_type: 7, alignment: 32 });
  t.match(md.llama, {
    context_length: 1024, embedding_length: 64, block_count: 2, feed_forward_length: 128, vocab_size: 3000,
    attention: { head_count: 4, head_count_kv: 2 }, rope: { dimension_count: 16 },
  });
  const tok = md.tokenizer;
  t.equal(tok.ggml.model, "llama");
  t.equal(tok.ggml.tokens.length, 3000);
  t.equal(tok.ggml.tokens[tok.ggml.eos_token_id!], "<|im_end|>");
  t.equal(tok.ggml.tokens[tok.ggml.bos_token_id!], "<s>");
  t.ok(tok.ggml.tokens.includes("</s>"));
  t.equal(tok.chat_template, CHATML_TEMPLATE);
  const names = info.tensorInfo?.map((x) => x.name) ?? [];
  t.equal(names.length, 3 + 9 * 2);
  for (const n of ["token_embd.weight", "output_norm.weight", "output.weight", "blk.1.ffn_down.weight", "blk.0.attn_k.weight"]) t.ok(names.includes(n), n);
  t.same(info.tensorInfo?.find((x) => x.name === "blk.0.attn_k.weight")?.dimensions, [64, 32], "k projection is GQA-sized");

  const model = await load(r.file);
  t.teardown(() => model.dispose());
  t.type(resolveChatWrapper(model), ChatMLChatWrapper);
  const plain = await load((await makeModel(join(dir, "plain.gguf"))).file);
  t.notOk(resolveChatWrapper(plain) instanceof ChatMLChatWrapper, "no template, no ChatML");
  await plain.dispose();
  const imEnd = model.tokenize("<|im_end|>", true);
  t.same(imEnd, [model.tokens.eos], "<|im_end|> is one control token and the eos");
  t.equal(model.tokenize("<|im_end|>").length > 1, true, "not parsed from plain text");
});

t.test("bad shapes are refused before anything is written", async (t) => {
  const dir = t.testdir();
  await t.rejects(makeModel(join(dir, "x.gguf"), { heads: 5 }), /multiple of heads/);
  await t.rejects(makeModel(join(dir, "x.gguf"), { feedForwardLength: 100 }), /multiples of 32/);
  await t.rejects(makeModel(join(dir, "x.gguf"), { vocabSize: 100 }), /at least/);
});

t.test("the CLI parses flags and reports what it wrote", async (t) => {
  const dir = t.testdir();
  const script = fileURLToPath(new URL("../../scripts/make-model.ts", import.meta.url));
  // Run the TypeScript source with the same loader tap gave this process.
  const cli = (...args: string[]) => promisify(execFile)(process.execPath, [...process.execArgv, script, ...args]);
  t.match((await cli("--help")).stdout, /--preset NAME/);
  await t.rejects(cli("--preset", "tiny", "--layers", "two"), { code: 2, stderr: /--out FILE is required/ });
  const out = join(dir, "cli.gguf");
  const { stdout } = await cli("--out", out, "--vocab", "1000", "--type", "f16", "--chat-template", "chatml", "--layers", "1", "--seed", "9");
  t.match(stdout, /wrote .*cli\.gguf: .*f16, vocab 1000/);
  const md = (await readGgufFileInfo(out, { logWarnings: false })).metadata;
  t.match(md.general, { file_type: 1, description: /seed 9/ });
  t.equal(md.llama.block_count, 1);
  t.equal(md.tokenizer.chat_template, CHATML_TEMPLATE);
});
