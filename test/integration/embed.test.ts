/**
 * /api/embed and /api/embeddings on the real runner: normalized batch vectors, `dimensions`,
 * `truncate`, the legacy raw vector, the load form and the errors.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

interface Embed {
  model: string;
  embeddings: number[][];
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
}

const norm = (v: readonly number[]) => Math.hypot(...v);

t.test("embeddings", async (t) => {
  // A short context so that "too long" is cheap to reach.
  const { url, app } = await startDaemon(t, {
    env: { SERVICE_CONTEXT_LENGTH: "128" },
    models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } }],
  });
  const embed = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/embed`, { model: "chat", ...body });
    t.equal(res.status, 200, "status 200");
    return (await res.json()) as Embed;
  };

  t.test("/api/embed: one vector per input, L2-normalized", async (t) => {
    const body = await embed({ input: ["red apple", "blue sky", "red apple"] });
    t.match(body, { model: "chat", total_duration: Number, load_duration: Number, prompt_eval_count: Number });
    t.equal(body.embeddings.length, 3);
    for (const v of body.embeddings) {
      t.equal(v.length, 64, "the model's embedding length");
      t.ok(Math.abs(norm(v) - 1) < 1e-9, "unit length");
    }
    t.same(body.embeddings[0], body.embeddings[2], "the same input gives the same vector");
    t.notSame(body.embeddings[0], body.embeddings[1], "different inputs give different vectors");
    const single = await embed({ input: "red apple" });
    t.same(single.embeddings, [body.embeddings[0]], "a string input is a batch of one");
    t.ok(single.prompt_eval_count > 0 && body.prompt_eval_count > single.prompt_eval_count * 2, "prompt_eval_count counts every input");
  });

  t.test("dimensions keeps the first components, then normalizes", async (t) => {
    const full = (await embed({ input: "red apple" })).embeddings[0]!;
    const cut = (await embed({ input: "red apple", dimensions: 8 })).embeddings[0]!;
    t.equal(cut.length, 8);
    t.ok(Math.abs(norm(cut) - 1) < 1e-9, "unit length");
    const scale = norm(full.slice(0, 8));
    cut.forEach((x, i) => t.ok(Math.abs(x - full[i]! / scale) < 1e-6, `component ${i}`));
    await assertError(t, await postJson(`${url}/api/embed`, { model: "chat", input: "x", dimensions: 65 }), 400, "dimensions must be between 1 and 64");
    await assertError(t, await postJson(`${url}/api/embed`, { model: "chat", input: "x", dimensions: 0 }), 400, "dimensions must be between 1 and 1000000");
  });

  t.test("truncate", async (t) => {
    const long = "the quick brown fox jumps over the lazy dog ".repeat(80); // far over the context
    const body = await embed({ input: long });
    const contextLength = app.services.scheduler.list()[0]!.contextLength; // llama.cpp rounds 128 up
    t.equal(body.prompt_eval_count, contextLength - 1, "cut to fit the context by default");
    const head = await embed({ input: long, truncate: true });
    t.same(head.embeddings, body.embeddings, "truncate:true is the default");
    await assertError(
      t,
      await postJson(`${url}/api/embed`, { model: "chat", input: ["short", long], truncate: false }),
      400,
      /^input length exceeds maximum context length/,
    );
  });

  t.test("/api/embeddings: the older form, not normalized", async (t) => {
    const res = await postJson(`${url}/api/embeddings`, { model: "chat", prompt: "red apple" });
    t.equal(res.status, 200);
    const { embedding } = (await res.json()) as { embedding: number[] };
    t.equal(embedding.length, 64);
    t.ok(Math.abs(norm(embedding) - 1) > 1e-3, "raw vector");
    const unit = (await embed({ input: "red apple" })).embeddings[0]!;
    embedding.forEach((x, i) => t.ok(Math.abs(x / norm(embedding) - unit[i]!) < 1e-6, `component ${i} points the same way`));
    const empty = await postJson(`${url}/api/embeddings`, { model: "chat" });
    t.same(await empty.json(), { embedding: [] }, "no prompt: load form");
  });

  t.test("empty input is the load form", async (t) => {
    for (const input of [[], ""]) {
      const body = await embed({ input });
      t.same(body.embeddings, [], `${JSON.stringify(input)}: no vector, as Ollama (a string input counts only when not empty)`);
      t.equal(body.prompt_eval_count, 0);
    }
  });

  t.test("errors", async (t) => {
    await assertError(t, await postJson(`${url}/api/embed`, { model: "nope", input: "x" }), 404, "model 'nope' not found, try pulling it first");
    await assertError(t, await postJson(`${url}/api/embed`, { input: "x" }), 400, "model is required");
    await assertError(t, await postJson(`${url}/api/embed`, { model: "chat", input: 5 }), 400, "invalid type for parameter 'input': expected string or array");
    await assertError(t, await postJson(`${url}/api/embed`, { model: "chat", input: ["a", 1] }), 400, "invalid type for parameter 'input[1]': expected string");
    await assertError(t, await postJson(`${url}/api/embeddings`, { model: "chat", prompt: 1 }), 400, "invalid type for parameter 'prompt': expected string");
  });
});
