/**
 * Issue 13 item 15: a GGUF whose Jinja chat template loops (nested `range(100000)`) must not pin
 * its runner nor stop other models serving. node-llama-cpp renders the template while the model
 * loads (its chat-wrapper check), so the load's no-progress bound (SERVICE_LOAD_TIMEOUT) kills the
 * runner and answers 500; the parent's event loop and the other runners are untouched.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";

t.test("a looping chat template is bounded and other models keep serving", async (t) => {
  const { url } = await startDaemon(t, {
    env: { SERVICE_LOAD_TIMEOUT: "5s", SERVICE_MAX_LOADED_MODELS: "2" },
    models: [{ name: "tiny" }, { name: "loop", make: { preset: "tiny", template: LOOP } }],
  });
  // Another model is loaded and serving before the hostile one arrives.
  t.equal((await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } })).status, 200);
  const t0 = performance.now();
  const chat = postJson(`${url}/api/chat`, { model: "loop", messages: [{ role: "user", content: "hi" }], stream: false }, { signal: AbortSignal.timeout(90_000) })
    .then(async (r) => ({ status: r.status, body: await r.text(), ms: performance.now() - t0 }), (e: Error) => ({ status: 0, body: e.message, ms: performance.now() - t0 }));
  await new Promise((r) => setTimeout(r, 2000));
  const other = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } }, { signal: AbortSignal.timeout(60_000) });
  const otherMs = performance.now() - t0;
  t.equal(other.status, 200, `another model serves meanwhile (${other.status} ${(await other.clone().text()).slice(0, 200)} at ${Math.round(otherMs)} ms)`);
  const c = await chat;
  t.comment(JSON.stringify({ ...c, body: c.body.slice(0, 300) }));
  t.equal(c.status, 500, "the looping template ends in 500");
  t.match(c.body, /failed to load model 'loop:latest': timed out after 5s/, "bounded by SERVICE_LOAD_TIMEOUT, with a clear message");
  const again = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(again.status, 200, "the other model still serves afterwards");
});
