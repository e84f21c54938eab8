/**
 * Nine real families (test/helpers/families.ts) served as they would be: models written by
 * make-model with a family's real vocabulary (every `tokenizer.*` key of llama.cpp's
 * `models/ggml-vocab-*.gguf`, Qwen 3 and DeepSeek-R1 with their own added tokens) and chat
 * template, random weights, one model per family. Per family:
 * - llama.cpp's own tokenizer test vectors (`.inp`/`.out`, read as tests/test-tokenizer-0.cpp reads
 *   them: no BOS, special-token text not parsed) come out of `/api/tokenize` token for token;
 * - `/api/show` gives the family's template;
 * - a chat with system, user, assistant (a tool call) and tool turns renders, through
 *   `_debug_render_only`, exactly what node-llama-cpp renders from the same file (its chat wrapper
 *   resolved in this process, the history built here by hand, not by lmd).
 * The forced tool call round trips and thinking are in families-tools.test.ts.
 */
import { readFile } from "node:fs/promises";
import t from "tap";
import { readTemplate } from "../../src/gguf/family-vocab.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { callMessage, nodeLlamaCppRendering, question, resultMessage, tools } from "../helpers/family-chat.js";
import { FAMILIES, familyModel, vocabPath } from "../helpers/families.js";
import { llamaSrc } from "../helpers/llama-src.js";
import { testGguf } from "../helpers/models.js";
import { ollamaDecoder, sentencePiece } from "../helpers/pieces.js";

/** llama.cpp's test vectors: inputs split on its separator, one line of token ids per input. */
async function vectors(file: string): Promise<{ text: string; tokens: number[] }[]> {
  const inputs = (await readFile(`${file}.inp`, "utf8")).split("\n__ggml_vocab_test__\n");
  if (inputs.at(-1) === "") inputs.pop();
  const outputs = (await readFile(`${file}.out`, "utf8")).split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${file}: ${inputs.length} inputs, ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, tokens: outputs[i]!.trim().split(/\s+/).filter(Boolean).map(Number) }));
}

/** The families whose chat template shows no tools (Phi-3.5's mentions neither `tools` nor `tool_call`). */
const NO_TOOLS = new Set(["phi3.5"]);

t.test("real families: tokenizer vectors, template, rendering", async (t) => {
  const src = await llamaSrc();
  const makes = new Map(await Promise.all(FAMILIES.map(async (f) => [f.name, await familyModel(f)] as const)));
  // Written one after the other (cached across test files); node-llama-cpp's renderings follow in
  // this process while the daemon's runners load the models.
  const files = new Map<string, string>();
  for (const f of FAMILIES) files.set(f.name, await testGguf(makes.get(f.name)));
  const renderings = new Map<string, ReturnType<typeof nodeLlamaCppRendering>>();
  let chain: Promise<unknown> = Promise.resolve();
  for (const f of FAMILIES) {
    const p = chain.then(() => nodeLlamaCppRendering(files.get(f.name)!, !NO_TOOLS.has(f.name)));
    p.catch(() => undefined);
    renderings.set(f.name, p);
    chain = p.catch(() => undefined);
  }
  const { url } = await startDaemon(t, { models: FAMILIES.map((f) => ({ name: f.name, make: makes.get(f.name)! })), env: { SERVICE_CONTEXT_LENGTH: "512" } });

  for (const f of FAMILIES) {
    t.test(`${f.name} (ggml-vocab-${f.vocab}, ${f.template})`, async (t) => {
      const cases = await vectors(vocabPath(src, f.vocab));
      // The first request loads the model; the rest go together.
      const tokenize = async (content: string) =>
        ((await (await postJson(`${url}/api/tokenize`, { model: f.name, content, parse_special: false })).json()) as { tokens: number[] }).tokens;
      const first = await tokenize(cases[0]!.text);
      const got = [first, ...(await Promise.all(cases.slice(1).map((c) => tokenize(c.text))))];
      let same = 0;
      for (const [i, c] of cases.entries()) {
        if (JSON.stringify(got[i]) === JSON.stringify(c.tokens)) same++;
        else t.same(got[i], c.tokens, `tokens of ${JSON.stringify(c.text).slice(0, 60)}`);
      }
      t.equal(same, cases.length, `all ${cases.length} of llama.cpp's test vectors`);

      const show = (await (await postJson(`${url}/api/show`, { model: f.name })).json()) as { template: string; capabilities: string[] };
      t.equal(show.template, await readTemplate(f.template, src), "the family's chat template is the model's");

      // A template that shows no tools refuses them (Ollama's tools capability); the conversation,
      // its call and result included, still renders.
      const toolless = NO_TOOLS.has(f.name);
      t.equal(show.capabilities.includes("tools"), !toolless, toolless ? "its template shows no tools" : "its template shows tools");
      if (toolless)
        await assertError(
          t,
          await postJson(`${url}/api/chat`, { model: f.name, stream: false, tools, messages: question, _debug_render_only: true }),
          400,
          `registry.ollama.ai/library/${f.name}:latest does not support tools`,
        );
      const res = await postJson(`${url}/api/chat`, {
        model: f.name,
        stream: false,
        ...(toolless ? {} : { tools }),
        messages: [...question, callMessage, resultMessage],
        _debug_render_only: true,
      });
      const body = (await res.json()) as { _debug_info?: { rendered_template: string }; error?: string };
      t.equal(res.status, 200, body.error ?? "rendered");
      const expected = await renderings.get(f.name)!;
      t.equal(
        body._debug_info?.rendered_template,
        expected.text,
        `system, user, assistant and tool turns render as node-llama-cpp renders them (${expected.wrapper})`,
      );

      // SentencePiece (Phi-3's): the text is the tokens' pieces, the first token's leading space
      // included, as Ollama sends them (the prompt rendered by the GGUF template, node-llama-cpp's completion).
      if (await sentencePiece(files.get(f.name)!)) {
        const decode = await ollamaDecoder(files.get(f.name)!);
        const r = (await (
          await postJson(`${url}/api/generate`, { model: f.name, prompt: "Hello", stream: false, options: { temperature: 0, num_predict: 8 } })
        ).json()) as { response: string; context: number[]; eval_count: number };
        const generated = r.context.slice(-r.eval_count);
        t.ok(decode(generated.slice(0, 1)).startsWith(" "), `the first token's piece starts with a space: ${JSON.stringify(decode(generated.slice(0, 1)))}`);
        t.equal(r.response, decode(generated), "the response is the generated tokens' pieces");
      }
    });
  }
});
