/**
 * Tokenizing in chunks (src/runner/tokens.ts) gives exactly the tokens of tokenizing the whole
 * text, on real SentencePiece vocabularies (llama.cpp's Llama and Phi-3 vocabulary files, whose
 * special tokens strip whitespace, and the generated test models' vocabulary with ChatML tokens):
 * random texts of words, spaces, newlines, emoji, accented and CJK characters, special tokens'
 * texts and SentencePiece's own space character, cut every few characters; and on texts long
 * enough for the asynchronous form to cut them itself, with node-llama-cpp's leading-space option.
 * Other vocabulary types are not cut.
 */
import t from "tap";
import { getLlama, type LlamaModel } from "node-llama-cpp";
import { tokenizeAsync, tokenizeInChunks, tokenizeWhole } from "../../src/runner/tokens.js";
import { llamaSrc } from "../helpers/llama-src.js";
import { testGguf } from "../helpers/models.js";

const PIECES = [
  "a", "b", "the", "word", " ", "  ", "\n", "\n\n", "\t", "\u{1F600}", "é", "中文", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|end|>",
  "<|user|>", "12", "3", ".", ",", "\u2581", " x", "ab ",
];

function texts(seed: number, count: number, length: number): string[] {
  let state = seed;
  const random = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  return Array.from({ length: count }, () => {
    let text = "";
    const target = length / 2 + Math.floor(random() * length);
    while (text.length < target) text += PIECES[Math.floor(random() * PIECES.length)];
    return text;
  });
}

t.test("chunked tokens are the whole text's tokens", async (t) => {
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
  const src = await llamaSrc();
  const vocabularies: Record<string, string> = {
    generated: await testGguf({ preset: "tiny", chatTemplate: "chatml" }),
    "llama-spm": `${src}/models/ggml-vocab-llama-spm.gguf`,
    "phi-3": `${src}/models/ggml-vocab-phi-3.gguf`,
  };
  const models: LlamaModel[] = [];
  t.teardown(async () => {
    for (const model of models) await model.dispose();
  });
  for (const [name, file] of Object.entries(vocabularies)) {
    const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
    models.push(model);
    let cut = 0;
    let differ = 0;
    for (const text of texts(name.length, 200, 300)) {
      for (const special of [true, false]) {
        const whole = Array.from(tokenizeWhole(model, text, special));
        const chunked = tokenizeInChunks(model, text, special, 8)!;
        cut += chunked.chunks - 1;
        if (JSON.stringify(Array.from(chunked.tokens)) !== JSON.stringify(whole)) differ++;
      }
    }
    t.equal(differ, 0, `${name}: 400 texts cut into pieces of ~8 characters tokenize as wholes`);
    t.ok(cut > 400 * 10, `${name}: the texts were cut (${cut} cuts)`);
    let long = 0;
    for (const text of texts(7, 6, 20_000)) {
      for (const special of [true, false]) {
        const whole = Array.from(tokenizeWhole(model, text, special));
        if (JSON.stringify(await tokenizeAsync(model, text, special)) !== JSON.stringify(whole)) long++;
        // The leading-space option (node-llama-cpp's, for text that follows other text): same as model.tokenize.
        if (JSON.stringify(await tokenizeAsync(model, text, special, "trimLeadingSpace")) !== JSON.stringify(model.tokenize(text, special, "trimLeadingSpace")))
          long++;
      }
    }
    t.equal(long, 0, `${name}: long texts, asynchronously, as a whole`);
  }
  const bpe = await llama.loadModel({ modelPath: `${src}/models/ggml-vocab-llama-bpe.gguf`, vocabOnly: true });
  models.push(bpe);
  t.equal(tokenizeInChunks(bpe, "a b c", true, 8), undefined, "a BPE vocabulary is not cut");
});
