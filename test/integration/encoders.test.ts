/**
 * A BERT-architecture embedding model (random weights, the real bge WordPiece vocabulary, written
 * by make-model's BERT writer) served through /api/embed and /v1/embeddings: the vectors are
 * normalized, batched, deterministic, and the ones node-llama-cpp computes for the same file.
 */
import t from "tap";
import { getLlama } from "node-llama-cpp";
import { installGguf } from "../../src/store/install.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { bertGguf } from "../helpers/encoder-models.js";

const norm = (v: readonly number[]) => Math.hypot(...v);
const unit = (v: readonly number[]) => v.map((x) => x / norm(v));
const maxDiff = (a: readonly number[], b: readonly number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? NaN))));

t.test("a BERT embedding model through /api/embed and /v1/embeddings", async (t) => {
  const file = await bertGguf();
  const { url, app } = await startDaemon(t, { models: [] });
  await installGguf(app.services.store, "bge-tiny", file, { architecture: "bert", fileType: "Q8_0" });
  const texts = ["hello world", "the quick brown fox", "hello world"];

  const res = await postJson(`${url}/api/embed`, { model: "bge-tiny", input: texts });
  t.equal(res.status, 200);
  const body = (await res.json()) as { embeddings: number[][]; prompt_eval_count: number };
  t.equal(body.embeddings.length, 3, "one vector per input");
  for (const v of body.embeddings) {
    t.equal(v.length, 64, "the model's embedding length");
    t.ok(Math.abs(norm(v) - 1) < 1e-9, "unit length");
  }
  t.same(body.embeddings[0], body.embeddings[2], "the same text gives the same vector");
  t.ok(maxDiff(body.embeddings[0]!, body.embeddings[1]!) > 1e-4, "different texts give different vectors");
  // [CLS] hello world [SEP] + [CLS] the quick brown fox [SEP] + [CLS] hello world [SEP]: WordPiece ids.
  t.equal(body.prompt_eval_count, 4 + 6 + 4, "prompt_eval_count counts CLS and SEP of every input");

  const cut = (await (await postJson(`${url}/api/embed`, { model: "bge-tiny", input: "hello world", dimensions: 16 })).json()) as { embeddings: number[][] };
  t.equal(cut.embeddings[0]?.length, 16);
  t.ok(Math.abs(norm(cut.embeddings[0]!) - 1) < 1e-9, "dimensions: cut, then normalized");

  const oa = await postJson(`${url}/v1/embeddings`, { model: "bge-tiny", input: ["hello world", "the quick brown fox"] });
  t.equal(oa.status, 200);
  const oaBody = (await oa.json()) as { data: Array<{ embedding: number[]; index: number }>; usage: { prompt_tokens: number } };
  t.same(oaBody.data.map((d) => d.index), [0, 1]);
  t.same(oaBody.data[0]?.embedding, body.embeddings[0], "/v1/embeddings gives /api/embed's vector");
  t.same(oaBody.data[1]?.embedding, body.embeddings[1]);
  t.equal(oaBody.usage.prompt_tokens, 10);

  const show = (await (await postJson(`${url}/api/show`, { model: "bge-tiny" })).json()) as { capabilities: string[]; model_info: Record<string, unknown> };
  t.same(show.capabilities, ["embedding"], "an encoder is an embedding model");
  t.equal(show.model_info["general.architecture"], "bert");
  t.equal(show.model_info["bert.pooling_type"], 2, "CLS pooling, as bge");

  t.test("an input over the context is cut to fit, leaving room for [SEP]", async (t) => {
    const long = "the quick brown fox jumps over the lazy dog ".repeat(80); // ~720 tokens > 512
    const res = await postJson(`${url}/api/embed`, { model: "bge-tiny", input: long });
    t.equal(res.status, 200, "not a 500 from node-llama-cpp's own length check");
    const body = (await res.json()) as { embeddings: number[][]; prompt_eval_count: number };
    t.equal(body.prompt_eval_count, 511, "the context (512, the model's trained length) less one");
    t.equal(body.embeddings[0]?.length, 64);
    const refused = await postJson(`${url}/api/embed`, { model: "bge-tiny", input: long, truncate: false });
    t.equal(refused.status, 400);
    t.match(((await refused.json()) as { error: string }).error, /^input length exceeds maximum context length \(\d+ tokens > 511\)$/);
  });

  t.test("the vectors equal node-llama-cpp's own for the same file", async (t) => {
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
    t.teardown(() => llama.dispose());
    const model = await llama.loadModel({ modelPath: file });
    const ctx = await model.createEmbeddingContext({ contextSize: 512, threads: 1 });
    for (const [i, text] of texts.slice(0, 2).entries()) {
      const direct = unit((await ctx.getEmbeddingFor(text)).vector);
      t.ok(maxDiff(direct, body.embeddings[i]!) < 1e-5, `'${text}': same vector (max difference ${maxDiff(direct, body.embeddings[i]!).toExponential(1)})`);
    }
    t.same(model.tokenize("hello world"), [7592, 2088], "bge's real WordPiece ids");
  });
});
