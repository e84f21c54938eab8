/**
 * A GGUF whose Jinja chat template loops (nested `range(100000)`) must not pin
 * its runner nor stop other models serving. node-llama-cpp renders the template while the model
 * loads (its chat-wrapper check), so the load's no-progress bound (SERVICE_LOAD_TIMEOUT) kills the
 * runner and answers 500; the parent's event loop and the other runners are untouched. A template
 * that is cheap at load but loops on some chats is bounded by SERVICE_RENDER_TIMEOUT: the runner
 * is killed, the request answered 400, and the next request reloads the model.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";

t.test("a looping chat template is bounded and other models keep serving", async (t) => {
  const { url } = await startDaemon(t, {
    // 15 s, not less: the bound applies to every load, and a sound model's load on a busy 2-core
    // machine was measured at 5.6 s before its first progress report.
    env: { SERVICE_LOAD_TIMEOUT: "15s", SERVICE_MAX_LOADED_MODELS: "2" },
    models: [{ name: "tiny" }, { name: "loop", make: { preset: "tiny", template: LOOP } }],
  });
  // Another model is loaded and serving before the hostile one arrives.
  t.equal((await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } })).status, 200);
  const t0 = performance.now();
  const chat = postJson(
    `${url}/api/chat`,
    { model: "loop", messages: [{ role: "user", content: "hi" }], stream: false },
    { signal: AbortSignal.timeout(90_000) },
  ).then(
    async (r) => ({ status: r.status, body: await r.text(), ms: performance.now() - t0 }),
    (e: Error) => ({ status: 0, body: e.message, ms: performance.now() - t0 }),
  );
  await new Promise((r) => setTimeout(r, 2000));
  const other = await postJson(
    `${url}/api/generate`,
    { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } },
    { signal: AbortSignal.timeout(60_000) },
  );
  const otherMs = performance.now() - t0;
  t.equal(other.status, 200, `another model serves meanwhile (${other.status} ${(await other.clone().text()).slice(0, 200)} at ${Math.round(otherMs)} ms)`);
  const c = await chat;
  t.comment(JSON.stringify({ ...c, body: c.body.slice(0, 300) }));
  t.equal(c.status, 500, "the looping template ends in 500");
  t.match(c.body, /failed to load model 'loop:latest': timed out after 15s/, "bounded by SERVICE_LOAD_TIMEOUT, with a clear message");
  const again = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(again.status, 200, "the other model still serves afterwards");
});

/**
 * Cheap while the model loads (node-llama-cpp's checks render a few short histories) and for short
 * chats; ~10^10 loop steps, writing nothing, once a chat has more than 12 messages. (The template
 * never sees the messages' text: node-llama-cpp renders it with placeholders, so a loop can only
 * depend on the number of messages, their roles or the tools.)
 */
const LOOP_ON_LONG_CHATS =
  "{% if messages|length > 12 %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}" +
  "{% for message in messages %}{{ '### ' + message['role'] + ':\\n' + message['content'] + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '### assistant:\\n' }}{% endif %}";

t.test("a chat template that loops only on some chats is bounded by SERVICE_RENDER_TIMEOUT", async (t) => {
  const { url } = await startDaemon(t, {
    env: { SERVICE_RENDER_TIMEOUT: "2s", SERVICE_MAX_LOADED_MODELS: "2" },
    models: [{ name: "tiny" }, { name: "bomb", make: { preset: "tiny", template: LOOP_ON_LONG_CHATS } }],
  });
  const short = [{ role: "user", content: "hi" }];
  const chat = (messages: unknown[], ms: number) =>
    postJson(`${url}/api/chat`, { model: "bomb", messages, stream: false, options: { num_predict: 2 } }, { signal: AbortSignal.timeout(ms) });
  t.equal((await chat(short, 60_000)).status, 200, "the model loads and serves a short chat");
  t.equal(
    (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } })).status,
    200,
    "another model is loaded",
  );

  const long = Array.from({ length: 13 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: `turn ${i}` }));
  const t0 = performance.now();
  const hostile = chat(long, 60_000).then(
    async (res) => ({ res, ms: performance.now() - t0 }),
    (err: Error) => ({ res: undefined, ms: performance.now() - t0, err }),
  );
  // Another model is asked while the template loops.
  const other = new Promise((r) => setTimeout(r, 500)).then(() =>
    postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } }, { signal: AbortSignal.timeout(30_000) }),
  );
  const slowest = await slowestVersionWhile(url, hostile);
  const h = await hostile;
  t.ok(h.res, `the looping chat was answered (${Math.round(h.ms)} ms)`);
  if (h.res) await assertError(t, h.res, 400, "the model's chat template did not render these messages within 2s");
  t.ok(h.ms < 30_000, "within the budget (2 s), far from the hours the loop would take");
  t.ok(slowest < 1000, `/api/version answered within 1 s meanwhile (slowest ${Math.round(slowest)} ms)`);
  t.equal((await other).status, 200, "the other model serves meanwhile");
  t.equal((await chat(short, 60_000).catch(() => undefined))?.status, 200, "the next chat with that model is served (its runner started again)");
});

/** Polls /api/version every 100 ms while `work` runs; returns the slowest answer in ms. */
async function slowestVersionWhile(url: string, work: Promise<unknown>): Promise<number> {
  let done = false;
  void work.finally(() => (done = true));
  let slowest = 0;
  do {
    const t0 = performance.now();
    await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(5_000) }).then((res) => res.text(), () => undefined);
    slowest = Math.max(slowest, performance.now() - t0);
    await new Promise((r) => setTimeout(r, 100));
  } while (!done);
  return slowest;
}
