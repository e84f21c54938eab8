/**
 * Shutdown on fake runners: draining keeps serving what was received (leases, queued requests, a
 * load in progress) and `drain()` resolves only when all of it is done; `unloadAll()` refuses what
 * is left and every later request with "server is shutting down", and stops every runner.
 */
import t from "tap";
import { ShuttingDownError } from "../../src/errors.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

t.setTimeout(60_000);

const [a, b] = [fakeModel("a"), fakeModel("b")];
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
const SHUTTING_DOWN = { status: 503, message: "server is shutting down", headers: { "retry-after": "5" } };

t.test("drain waits for leases, queued requests and a load; they are served meanwhile", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2 }, (key) => ({ hold: key === "b" }));
  const lease = await scheduler.acquire(a);
  const queued = scheduler.acquire(a);
  const loading = scheduler.acquire(b);
  await runners.seen("hold b");
  scheduler.startDraining();
  t.equal(scheduler.readiness().accepting, false, "/readyz turns unready");
  let drained = false;
  const drain = scheduler.drain().then(() => (drained = true));
  await settle();
  t.notOk(drained, "a lease is held");
  lease.release();
  const second = await queued;
  t.equal(second.model.key, "a", "a queued request is served while draining");
  await settle();
  t.notOk(drained, "still one lease and a load");
  second.release();
  runners.finish("b");
  (await loading).release();
  await drain;
  t.ok(drained);
  const late = await scheduler.acquire(a);
  t.equal(late.model.key, "a", "a request received before the signal is still served while draining");
  late.release();
});

t.test("drain waits for a load that was cancelled until the runner has ended", async (t) => {
  const { scheduler, runners } = fakeScheduler({}, () => ({ hold: true, slowCancel: true }));
  const ac = new AbortController();
  const lease = scheduler.acquire(a, { signal: ac.signal });
  await runners.seen("hold a");
  ac.abort(new Error("gone"));
  await t.rejects(lease, { message: "gone" });
  t.equal(scheduler.queueDepth, 0, "nobody waits any more");
  scheduler.startDraining();
  let drained = false;
  const drain = scheduler.drain().then(() => (drained = true));
  await settle();
  t.notOk(drained, "the load is still winding down");
  runners.finish("a"); // its runner has ended
  await drain;
  t.equal(scheduler.loadingModel, undefined);
  t.same(scheduler.list(), []);
});

t.test("unloadAll refuses what is left and later requests, cancels a load and stops every runner", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2 }, (key) => ({ hold: key === "b" }));
  const lease = await scheduler.acquire(a);
  const job = runners.runner("a")!.work();
  const queued = scheduler.acquire(a);
  const loading = scheduler.acquire(b);
  await runners.seen("hold b");
  scheduler.startDraining();
  await scheduler.unloadAll();
  await t.rejects(queued, SHUTTING_DOWN);
  await t.rejects(loading, SHUTTING_DOWN, "the request waiting for the load is refused, not failed");
  t.type(await queued.catch((e: unknown) => e), ShuttingDownError);
  await t.rejects(job, SHUTTING_DOWN, "a running job ends with 503");
  t.ok(runners.events.includes("cancel b"), "the load was stopped");
  t.type(runners.runner("a")?.stopReason, ShuttingDownError, "the runner was stopped with the shutdown's reason");
  t.equal(runners.runner("a")?.alive, false);
  t.same(scheduler.list(), []);
  await t.rejects(scheduler.acquire(a), SHUTTING_DOWN, "every later request is refused");
  lease.release(); // a late release after shutdown is harmless
  t.equal(scheduler.queueDepth, 0);
});

t.test("drain resolves at once when nothing is running", async (t) => {
  const { scheduler } = fakeScheduler();
  (await scheduler.acquire(a)).release();
  scheduler.startDraining();
  await scheduler.drain();
  await scheduler.unloadAll();
  t.same(scheduler.list(), []);
});
