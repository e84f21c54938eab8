/**
 * Real families' tokenizers through `/api/tokenize` (issue 12 item 7, "Must show"): models written
 * by make-model with a family's real vocabulary (every `tokenizer.*` key of llama.cpp's
 * `models/ggml-vocab-*.gguf`) and chat template, random weights. llama.cpp's own tokenizer test
 * vectors (`.inp`/`.out`, read as tests/test-tokenizer-0.cpp reads them: no BOS, special-token
 * text not parsed) must come out of the daemon token for token.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { readTemplate, readTokenizer } from "../../src/gguf/family-vocab.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { llamaSrc } from "../helpers/llama-src.js";

/** Family → llama.cpp's vocabulary file and chat template of that family. */
const FAMILIES = [
  { name: "llama3.1", vocab: "llama-bpe", template: "meta-llama-Llama-3.1-8B-Instruct" },
  { name: "qwen2.5", vocab: "qwen2", template: "Qwen-Qwen2.5-7B-Instruct" },
  { name: "qwen3.5", vocab: "qwen35", template: "Qwen3.5-4B" },
  { name: "gemma4", vocab: "gemma-4", template: "google-gemma-4-31B-it" },
  { name: "phi3.5", vocab: "phi-3", template: "microsoft-Phi-3.5-mini-instruct" },
  { name: "command-r-plus", vocab: "command-r", template: "CohereForAI-c4ai-command-r-plus-tool_use" },
] as const;

/** llama.cpp's test vectors: inputs split on its separator, one line of token ids per input. */
async function vectors(file: string): Promise<{ text: string; tokens: number[] }[]> {
  const inputs = (await readFile(`${file}.inp`, "utf8")).split("\n__ggml_vocab_test__\n");
  if (inputs.at(-1) === "") inputs.pop();
  const outputs = (await readFile(`${file}.out`, "utf8")).split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${file}: ${inputs.length} inputs, ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, tokens: outputs[i]!.trim().split(/\s+/).filter(Boolean).map(Number) }));
}

t.test("real families' tokenizers through /api/tokenize", async (t) => {
  const src = await llamaSrc();
  const vocabFile = (v: string) => path.join(src, "models", `ggml-vocab-${v}.gguf`);
  const models = [];
  for (const f of FAMILIES) {
    // Tiny: a 32-wide embedding keeps even Gemma's 262k-token vocabulary at a few MB of weights.
    const make = { preset: "tiny" as const, embeddingLength: 32, heads: 2, kvHeads: 2, feedForwardLength: 64, layers: 1, tokenizer: await readTokenizer(vocabFile(f.vocab)), template: await readTemplate(f.template, src) };
    models.push({ name: f.name, make });
  }
  const { url } = await startDaemon(t, { models, env: { SERVICE_CONTEXT_LENGTH: "256" } });

  for (const f of FAMILIES) {
    t.test(`${f.name} (ggml-vocab-${f.vocab})`, async (t) => {
      const cases = await vectors(vocabFile(f.vocab));
      let same = 0;
      for (const c of cases) {
        const res = await postJson(`${url}/api/tokenize`, { model: f.name, content: c.text, parse_special: false });
        const body = (await res.json()) as { tokens: number[] };
        if (JSON.stringify(body.tokens) === JSON.stringify(c.tokens)) same++;
        else t.same(body.tokens, c.tokens, `tokens of ${JSON.stringify(c.text).slice(0, 60)}`);
      }
      t.equal(same, cases.length, `all ${cases.length} of llama.cpp's test vectors`);
      const show = await postJson(`${url}/api/show`, { model: f.name });
      t.equal(((await show.json()) as { template: string }).template, await readTemplate(f.template, src), "the family's chat template is the model's");
    });
  }
});
