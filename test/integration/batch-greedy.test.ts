/**
 * Four concurrent streams on the demo model, decoded together in one batch per step, produce the
 * same greedy text as each prompt alone: batching sequences changes how a step is computed, never
 * what a sequence generates. Speed is measured by bench/, not here.
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

const PROMPTS = ["once upon a time", "the quick brown fox", "a list of colours:", "in the beginning"];
const OPTIONS = { num_predict: 96, temperature: 0 };

async function generate(url: string, prompt: string) {
  const res = await postJson(`${url}/api/generate`, { model: "demo", prompt, raw: true, options: OPTIONS });
  const lines = await readNdjson(res);
  const final = lines[lines.length - 1] ?? {};
  const chunks = lines.filter((l) => l.done === false);
  return { status: res.status, text: chunks.map((l) => l.response).join(""), final, received: performance.now() };
}

t.test("four concurrent greedy streams generate what each generates alone", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "4" }, models: [{ name: "demo", make: { preset: "demo", seed: 42 } }] });
  const alone = [];
  for (const prompt of PROMPTS) alone.push(await generate(url, prompt));
  let most = 0;
  const poll = setInterval(() => (most = Math.max(most, app.services.scheduler.list()[0]?.active ?? 0)), 1);
  const together = await Promise.all(PROMPTS.map((prompt) => generate(url, prompt)));
  clearInterval(poll);
  t.equal(most > 1, true, `the streams ran at once (up to ${most} slots busy)`);
  for (const [i, prompt] of PROMPTS.entries()) {
    const a = alone[i]!;
    const b = together[i]!;
    t.equal(b.status, 200, `'${prompt}': answered`);
    t.equal(a.final.eval_count, OPTIONS.num_predict, `'${prompt}' alone: ${OPTIONS.num_predict} tokens`);
    t.equal(b.final.eval_count, OPTIONS.num_predict, `'${prompt}' together: ${OPTIONS.num_predict} tokens`);
    t.ok(a.text.length > 0, `'${prompt}': text`);
    t.equal(b.text, a.text, `'${prompt}': the same text together as alone`);
    t.same(b.final.context, a.final.context, `'${prompt}': the same tokens together as alone`);
  }
});
