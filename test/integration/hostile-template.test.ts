/**
 * A template that made the old regex-based splitter cubic (`{{` followed by
 * thousands of spaces and no `}}`) must not freeze the daemon. While such a request is in flight,
 * through `/api/generate` and stored in a model by `/api/create`, `/api/version` keeps answering
 * within a second, and the hostile request itself ends with a clean 400. (Before: 60 s of a frozen
 * daemon for 6000 spaces, cubic in their number.)
 */
import path from "node:path";
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson } from "../helpers/daemon.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";

const HOSTILE = `{{${" ".repeat(6000)}`;

/** Polls /api/version every 100 ms while `work` runs; returns the slowest answer in ms. */
async function slowestVersionWhile(url: string, work: Promise<unknown>): Promise<number> {
  let done = false;
  void work.finally(() => (done = true));
  let slowest = 0;
  do {
    const t0 = performance.now();
    // A frozen daemon does not answer at all: give up after 5 s and count that as the time.
    await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(5_000) }).then((res) => res.text(), () => undefined);
    slowest = Math.max(slowest, performance.now() - t0);
    await new Promise((r) => setTimeout(r, 100));
  } while (!done);
  return slowest;
}

t.test("a ReDoS-shaped template never stalls the daemon", async (t) => {
  // A daemon of its own process: a stalled event loop there cannot stall this test's clock.
  const store = new ModelStore(path.join(t.testdir(), "models"));
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  const { url } = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store.root });
  const generate = postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", template: HOSTILE, stream: false });
  const slowest = await slowestVersionWhile(url, generate);
  t.ok(slowest < 1000, `/api/version answered within 1 s while the template was handled (slowest ${slowest.toFixed(0)} ms)`);
  await assertError(t, await generate, 400);

  // Stored in a model: creating it and then generating with it.
  const create = postJson(`${url}/api/create`, { model: "hostile", from: "tiny", template: HOSTILE, stream: false });
  const slowestCreate = await slowestVersionWhile(url, create);
  t.ok(slowestCreate < 1000, `and while it was stored by /api/create (slowest ${slowestCreate.toFixed(0)} ms)`);
  // Refused at create (it cannot be parsed), so no model carries it.
  await assertError(t, await create, 400, /^template: template:1: /);
  await assertError(t, await postJson(`${url}/api/generate`, { model: "hostile", prompt: "hi", stream: false }), 404);
});
