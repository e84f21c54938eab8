/**
 * Hostile values that pass JSON parsing but must not reach a runner unchecked: numbers
 * too large for JSON's doubles (`1e400` parses to Infinity), a context far beyond the model's,
 * and a deeply nested `format` schema. Each gets a clean answer and the model keeps working.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const raw = (url: string, body: string) => fetch(`${url}/api/generate`, { method: "POST", headers: { "content-type": "application/json" }, body });

t.test("infinite and unsafe integers are refused with 400", async (t) => {
  const { url, app } = await startDaemon(t);
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"num_ctx":1e400}}'), 400, "num_ctx must be at most 9007199254740991");
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"num_predict":1e400}}'), 400, "num_predict must be at most 9007199254740991");
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"seed":-1e400}}'), 400, "seed must be at least -9007199254740991");
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"top_k":1e400}}'), 400, "top_k must be at most 9007199254740991");
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"temperature":1e400}}'), 400, "temperature must be between 0 and 2");
  await assertError(t, await raw(url, '{"model":"tiny","prompt":"hi","options":{"num_predict":-3}}'), 400, "num_predict must be at least -2");
  t.same(app.services.scheduler.list(), [], "no model was loaded for any of them");
});

t.test("a huge num_ctx is capped at the model's trained context", async (t) => {
  const { url } = await startDaemon(t);
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_ctx: 1e15, num_predict: 1 } });
  t.equal(res.status, 200);
  const ps = (await (await fetch(`${url}/api/ps`)).json()) as { models: Array<{ context_length: number }> };
  t.ok(ps.models[0] && ps.models[0].context_length <= 2048, `context ${ps.models[0]?.context_length} ≤ the trained 2048`);
});

t.test("a deeply nested format schema is refused with 400", async (t) => {
  const { url } = await startDaemon(t);
  const depth = 3000; // written as text: JSON.stringify itself would run out of stack
  const schema = `${'{"type":"object","required":["a"],"properties":{"a":'.repeat(depth)}{"type":"string"}${"}}".repeat(depth)}`;
  const res = await raw(url, `{"model":"tiny","prompt":"hi","stream":false,"options":{"num_predict":1},"format":${schema}}`);
  // JSON.stringify (the runner's IPC) would overflow the stack on it: refused before it is sent.
  await assertError(t, res, 400, "request nested too deeply (more than 128 levels)");
  const next = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(next.status, 200, "the model still works");
});
