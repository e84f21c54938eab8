/**
 * POST /v1/rerank and /api/rerank on a BERT reranker written by make-model (random weights, the
 * real bge vocabulary, a classification head): results sorted by score, indices and `top_n`
 * right, scores equal to node-llama-cpp's own `rankAll` for the same file; other models are a 400.
 * (Random weights make relevance itself meaningless, so only the mechanics are asserted.)
 */
import t from "tap";
import { getLlama } from "node-llama-cpp";
import { installGguf } from "../../src/store/install.js";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { assertError } from "../helpers/assert-error.js";
import { craftedCorpus } from "../helpers/crafted-gguf.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { bertGguf } from "../helpers/encoder-models.js";

interface Rerank {
  model: string;
  object: string;
  usage: { prompt_tokens: number; total_tokens: number };
  results: Array<{ index: number; relevance_score: number; document?: { text: string } }>;
}

const file = await bertGguf({ pooling: "rank" });
const { url, app } = await startDaemon(t); // `tiny`: a llama model, not a reranker
await installGguf(app.services.store, "reranker", file, { architecture: "bert", fileType: "Q8_0" });
await installGguf(app.services.store, "bge-tiny", await bertGguf(), { architecture: "bert", fileType: "Q8_0" });

const query = "what do cats eat";
const documents = [
  "Cats are carnivores and eat meat.",
  "The stock market fell today.",
  "Kittens drink milk.",
  "Paris is the capital of France.",
  "Dogs bark at night.",
];

t.test("results sorted by score, every index once, usage counted", async (t) => {
  const res = await postJson(`${url}/v1/rerank`, { model: "reranker", query, documents });
  t.equal(res.status, 200);
  const body = (await res.json()) as Rerank;
  t.match(body, { model: "reranker", object: "list" });
  t.equal(body.results.length, documents.length);
  t.same([...body.results.map((r) => r.index)].sort(), [0, 1, 2, 3, 4], "each document once");
  for (let i = 1; i < body.results.length; i++) t.ok(body.results[i - 1]!.relevance_score >= body.results[i]!.relevance_score, `sorted at ${i}`);
  for (const r of body.results) t.ok(r.relevance_score > 0 && r.relevance_score < 1, "a probability");
  t.equal(new Set(body.results.map((r) => r.relevance_score)).size, documents.length, "the documents score differently");
  t.ok(body.usage.prompt_tokens > 5 * 4 && body.usage.total_tokens === body.usage.prompt_tokens, "usage counts every pair's tokens");
  t.notOk("document" in body.results[0]!, "no documents unless asked");

  t.test("the scores are node-llama-cpp's rankAll for the same inputs", async (t) => {
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1 });
    t.teardown(() => llama.dispose());
    const model = await llama.loadModel({ modelPath: file });
    const ctx = await model.createRankingContext({ contextSize: 512, threads: 1 });
    const direct = await ctx.rankAll(query, documents);
    for (const r of body.results)
      t.ok(Math.abs(r.relevance_score - direct[r.index]!) < 1e-6, `document ${r.index}: ${r.relevance_score} vs ${direct[r.index]}`);
    const tokens = documents.reduce((n, d) => n + ctx.calculateInputLength(query, d), 0);
    t.equal(body.usage.prompt_tokens, tokens, "usage is the evaluated tokens");
  });

  t.test("top_n keeps the best n; /api/rerank is an alias; {text} documents; return_documents", async (t) => {
    const top = (await (
      await postJson(`${url}/api/rerank`, { model: "reranker", query, documents: documents.map((text) => ({ text })), top_n: 2, return_documents: true })
    ).json()) as Rerank;
    t.same(top.results.map((r) => r.index), body.results.slice(0, 2).map((r) => r.index), "the two best, in order");
    t.same(top.results.map((r) => r.document?.text), body.results.slice(0, 2).map((r) => documents[r.index]), "with their text");
    const all = (await (await postJson(`${url}/v1/rerank`, { model: "reranker", query, documents, top_n: 50 })).json()) as Rerank;
    t.equal(all.results.length, documents.length, "top_n beyond the documents keeps them all");
  });
});

t.test("errors", async (t) => {
  await assertError(t, await postJson(`${url}/v1/rerank`, { model: "tiny", query, documents }), 400, "model 'tiny' does not support reranking");
  await assertError(t, await postJson(`${url}/v1/rerank`, { model: "bge-tiny", query, documents }), 400, "model 'bge-tiny' does not support reranking");
  const loaded = app.services.scheduler.list().map((m) => m.model.display);
  t.notOk(loaded.includes("tiny:latest") || loaded.includes("bge-tiny:latest"), "no model was loaded to refuse it");
  await assertError(t, await postJson(`${url}/v1/rerank`, { model: "nope", query, documents }), 404, "model 'nope' not found, try pulling it first");
  await assertError(t, await postJson(`${url}/v1/rerank`, { model: "reranker", documents }), 400, "query is required");
  await assertError(t, await postJson(`${url}/v1/rerank`, { model: "reranker", query, documents: [] }), 400, "documents must have at least 1 items");
  await assertError(
    t,
    await postJson(`${url}/v1/rerank`, { model: "reranker", query, documents, top_n: 0 }),
    400,
    "top_n must be between 1 and 9007199254740991",
  );
  await assertError(
    t,
    await postJson(`${url}/v1/rerank`, { model: "reranker", query, documents: ["word ".repeat(600)] }),
    400,
    /^input length exceeds maximum context length \(\d+ tokens > 511\)$/,
  );

  // A model file whose header cannot be read is the load's corrupt-model 500, as on every other endpoint.
  const corrupt = path.join(t.testdir(), "corrupt.gguf");
  await writeFile(corrupt, craftedCorpus()[0]!.data);
  await installGguf(app.services.store, "corrupt", corrupt);
  await assertError(
    t,
    await postJson(`${url}/v1/rerank`, { model: "corrupt", query, documents }),
    500,
    /^failed to load model 'corrupt:latest': corrupt model file: /,
  );

  const show = (await (await postJson(`${url}/api/show`, { model: "reranker" })).json()) as { capabilities: string[] };
  t.same(show.capabilities, ["reranking"], "Ollama's capability word");
});
