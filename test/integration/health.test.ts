/**
 * `/healthz` and `/readyz` against the real daemon: readiness per model follows the scheduler
 * (cold → 503, loaded with a free slot → 200, every slot busy → 503), answering never loads a
 * model, and a draining daemon is not ready.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("healthz answers without a model; readyz follows load, busy slots and draining", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "1" } });

  const health = await fetch(`${url}/healthz`);
  t.equal(health.status, 200);
  t.same(await health.json(), { status: "ok" });
  const ready = await fetch(`${url}/readyz`);
  t.equal(ready.status, 200);
  t.same(await ready.json(), { status: "ready" });

  // Cold model: not ready, and asking did not load it.
  const cold = await fetch(`${url}/readyz?model=tiny`);
  await assertError(t, cold, 503, "model 'tiny' is not loaded");
  t.equal(cold.headers.get("retry-after"), "1");
  t.same(app.services.scheduler.list(), [], "readyz loaded nothing");
  await assertError(t, await fetch(`${url}/readyz?model=nope`), 404, "model 'nope' not found, try pulling it first");
  await assertError(t, await fetch(`${url}/readyz?model=..%2F..%2Fetc`), 400, "invalid model name '../../etc'");

  // Loaded and idle: ready with its free slot.
  t.equal((await postJson(`${url}/api/generate`, { model: "tiny", prompt: "" })).status, 200);
  const warm = await fetch(`${url}/readyz?model=tiny`);
  t.equal(warm.status, 200);
  t.same(await warm.json(), { status: "ready", model: "tiny", free_slots: 1 });

  // Its only slot busy with a stream: not ready for this model, the daemon itself still ready.
  const abort = new AbortController();
  const stream = await postJson(
    `${url}/api/generate`,
    { model: "tiny", prompt: "Once", raw: true, options: { num_predict: 100_000 } },
    { signal: abort.signal },
  );
  const reader = stream.body!.getReader();
  await reader.read(); // the first token: the slot is held
  await assertError(t, await fetch(`${url}/readyz?model=tiny`), 503, "model 'tiny' has no free slot (0 waiting)");
  t.equal((await fetch(`${url}/readyz`)).status, 200);
  abort.abort();
  await reader.read().catch(() => undefined);

  // Draining: not ready (the answer comes on a connection that was open before the drain began).
  app.services.scheduler.startDraining();
  await assertError(t, await fetch(`${url}/readyz`), 503, "server is shutting down");
});
