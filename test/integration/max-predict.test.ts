/**
 * SERVICE_MAX_PREDICT: a model that never emits an end token must not stream
 * forever. The server caps generation; a request's smaller num_predict still wins.
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

async function generate(url: string, options: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hello", stream: false, options: { temperature: 0, seed: 1, ...options } });
  return (await res.json()) as Record<string, unknown>;
}

t.test("SERVICE_MAX_PREDICT caps generation with done_reason length", async (t) => {
  const d = await startDaemon(t, { env: { SERVICE_MAX_PREDICT: "6" } });
  const capped = await generate(d.url, {});
  t.equal(capped.eval_count, 6, "no num_predict: stopped at the cap");
  t.equal(capped.done_reason, "length");
  t.equal((await generate(d.url, { num_predict: 3 })).eval_count, 3, "a smaller num_predict wins");
  t.equal((await generate(d.url, { num_predict: 50 })).eval_count, 6, "a larger num_predict is capped");
  const streamed = await readNdjson(await postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "hi", options: { temperature: 0, num_predict: -1 } }));
  t.equal(streamed.at(-1)?.done_reason, "length", "streams end with done_reason length too");
  t.equal(streamed.at(-1)?.eval_count, 6);
});

t.test("the default cap is 4 x the context length", async (t) => {
  const d = await startDaemon(t, { env: { SERVICE_CONTEXT_LENGTH: "16" } });
  const r = await generate(d.url, { num_predict: -1 });
  t.equal(r.done_reason, "length");
  t.equal(r.eval_count, 64, "4 x num_ctx 16");
});
