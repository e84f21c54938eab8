/**
 * Which model goes to make room, on fake runners: at the resident bound the least recently used
 * idle model is evicted, never a busy or a pinned one (the request waits instead), and a model
 * loaded with other settings is reloaded once it is idle. The memory-driven eviction is in
 * scheduler-memory.test.ts.
 */
import t from "tap";
import { PolicyTable, type ModelPolicy } from "../../src/scheduler/policy.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

t.setTimeout(60_000);

const [a, b, c] = [fakeModel("a"), fakeModel("b"), fakeModel("c")];
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A policy file that pins model a. */
function pinA(): PolicyTable {
  const a: ModelPolicy = { name: "a", pinned: true, preload: false, options: {} };
  return new PolicyTable(new Map([["a", a]]), undefined);
}

t.test("at the bound, the least recently used idle model is evicted", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2 });
  (await scheduler.acquire(a)).release();
  (await scheduler.acquire(b)).release();
  (await scheduler.acquire(a)).release(); // b is now the least recently used
  t.same(
    scheduler.list().map((m) => m.model.key),
    ["a", "b"],
    "most recently used first",
  );
  (await scheduler.acquire(c)).release();
  t.same(runners.events, ["load a", "ready a", "load b", "ready b", "stop b", "load c", "ready c"]);
  t.same(scheduler.list().map((m) => m.model.key), ["c", "a"]);
  (await scheduler.acquire(b)).release();
  t.same(runners.events.slice(-3), ["stop a", "load b", "ready b"], "then a, now the least recently used");
});

t.test("a busy model is not evicted: the request waits for its release", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 1 });
  const lease = await scheduler.acquire(a);
  let got = false;
  const next = scheduler.acquire(b).then((l) => ((got = true), l));
  await settle();
  t.notOk(got);
  t.same(runners.events, ["load a", "ready a"], "a stays while in use");
  t.equal(scheduler.readiness("b").queued, 1);
  lease.release();
  (await next).release();
  t.same(runners.events, ["load a", "ready a", "stop a", "load b", "ready b"]);
});

t.test("a pinned model is never evicted, even as the least recently used", async (t) => {
  const table = pinA();
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2, policy: () => table });
  (await scheduler.acquire(a)).release();
  (await scheduler.acquire(b)).release();
  (await scheduler.acquire(c)).release();
  t.same(runners.events, ["load a", "ready a", "load b", "ready b", "stop b", "load c", "ready c"], "b went, not a");
  t.equal(scheduler.list().find((m) => m.model.key === "a")?.expiresAt, undefined);
});

t.test("every resident model pinned: the request waits", async (t) => {
  const table = pinA();
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 1, policy: () => table });
  (await scheduler.acquire(a)).release();
  const ac = new AbortController();
  const waiting = scheduler.acquire(b, { signal: ac.signal });
  await settle();
  t.same(runners.events, ["load a", "ready a"]);
  t.equal(scheduler.queueDepth, 1);
  ac.abort(new Error("gave up"));
  await t.rejects(waiting, { message: "gave up" });
});

t.test("a model loaded with other settings is reloaded once idle; matching settings share the runner", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2, numParallel: 2 });
  const first = await scheduler.acquire(a, { numCtx: 2048 });
  const same = await scheduler.acquire(a, { numCtx: 2048 });
  t.equal(same.runner, first.runner, "the same load serves both");
  let got = false;
  const other = scheduler.acquire(a, { numCtx: 4096 }).then((l) => ((got = true), l));
  await settle();
  t.notOk(got, "a reload waits for the runner's requests");
  first.release();
  same.release();
  const lease = await other;
  t.not(lease.runner, first.runner);
  t.same(
    runners.specs.map((s) => s.contextSize),
    [2048, 4096],
  );
  t.same(runners.events, ["load a", "ready a", "stop a", "load a", "ready a"]);
  lease.release();
});

t.test("a new digest of a loaded model is loaded anew", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2 });
  (await scheduler.acquire(a)).release();
  (await scheduler.acquire(fakeModel("a", {}, "1"))).release();
  t.same(runners.events, ["load a", "ready a", "stop a", "load a", "ready a"]);
  t.equal(scheduler.list().length, 1);
});

t.test("unload: an idle model goes now, a busy one when its last request ends", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2, defaultKeepAliveMs: -1 });
  (await scheduler.acquire(a)).release();
  const lease = await scheduler.acquire(b);
  await scheduler.unload("a");
  t.same(runners.events.at(-1), "stop a");
  await scheduler.unload("b");
  t.same(
    scheduler.list().map((m) => m.model.key),
    ["b"],
    "b stays while in use",
  );
  lease.release();
  await runners.seen("stop b");
  t.same(scheduler.list(), []);
});
