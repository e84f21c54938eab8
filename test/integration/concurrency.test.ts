/**
 * Eight concurrent streams on one model with eight slots (one context, eight sequences batched
 * together): every stream completes with its full length and its own final object, and the slots
 * are free afterwards. Speed is measured by bench/, not here.
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

t.test("8 concurrent streams on 8 slots all complete", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "8" } });
  const results = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: `${i} once upon a time`, raw: true, options: { num_predict: 32, seed: i, temperature: 0.8 } });
    t.equal(res.status, 200, `stream ${i} started`);
    return readNdjson(res);
  }));
  for (const [i, lines] of results.entries()) {
    const final = lines[lines.length - 1] ?? {};
    t.equal(final.done, true, `stream ${i} ended with its final object`);
    t.equal(final.eval_count, 32, `stream ${i} generated all 32 tokens`);
    t.equal(lines.filter((l) => l.done === false).map((l) => l.response).join("").length > 0, true, `stream ${i} streamed text`);
  }
  t.equal(app.services.scheduler.list()[0]?.active, 0, "every slot is free again");
});
