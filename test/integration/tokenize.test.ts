/**
 * `POST /api/tokenize` and `POST /api/detokenize` on the real daemon and runner:
 * llama-server's field names, `add_special` adding BOS as the vocabulary asks, a round trip back to
 * the text, and the request errors.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("/api/tokenize and /api/detokenize", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny" }] });
  const tokenize = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/tokenize`, { model: "tiny", ...body });
    t.equal(res.status, 200, "tokenize 200");
    return (await res.json()) as { tokens: number[] };
  };
  const detokenize = async (tokens: number[]) => {
    const res = await postJson(`${url}/api/detokenize`, { model: "tiny", tokens });
    t.equal(res.status, 200, "detokenize 200");
    return (await res.json()) as { content: string };
  };
  const gen = await postJson(`${url}/api/generate`, {
    model: "tiny",
    prompt: "Hello world, hello tokens",
    raw: true,
    stream: false,
    options: { num_predict: 1 },
  });
  const promptTokens = ((await gen.json()) as { prompt_eval_count: number }).prompt_eval_count;

  t.test("tokens round trip", async (t) => {
    const plain = await tokenize({ content: "Hello world, hello tokens" });
    t.same(Object.keys(plain), ["tokens"], "one field, tokens");
    t.ok(plain.tokens.length > 0 && plain.tokens.every((n) => Number.isInteger(n) && n >= 0), "integer token ids");
    const special = await tokenize({ content: "Hello world, hello tokens", add_special: true });
    t.equal(special.tokens.length, plain.tokens.length + 1, "add_special adds the BOS this vocabulary asks for");
    t.same(special.tokens.slice(1), plain.tokens, "after BOS, the same tokens");
    t.equal(special.tokens.length, promptTokens, "add_special counts what a raw generate evaluates");
    t.same(await detokenize(plain.tokens), { content: "Hello world, hello tokens" }, "detokenize restores the text");
    t.same(await tokenize({ content: "" }), { tokens: [] }, "empty content, no tokens");
  });

  t.test("errors", async (t) => {
    await assertError(t, await postJson(`${url}/api/tokenize`, { model: "tiny" }), 400, "content is required");
    await assertError(t, await postJson(`${url}/api/tokenize`, { content: "x" }), 400, "model is required");
    await assertError(t, await postJson(`${url}/api/tokenize`, { model: "nope", content: "x" }), 404, "model 'nope' not found, try pulling it first");
    await assertError(t, await postJson(`${url}/api/detokenize`, { model: "tiny", tokens: [1, -2] }), 400, "tokens[1] must be between 0 and 2147483647");
    await assertError(
      t,
      await postJson(`${url}/api/detokenize`, { model: "tiny", tokens: [1, 99999999] }),
      400,
      "token 99999999 is not in the model's vocabulary (size 4096)",
    );
  });
});
