/**
 * The scheduler's queue on fake runners: admission beyond the queue's bound is a 503 with the
 * contract's message, waiters are served in arrival order, and a request that gives up (while
 * queued, or while its model loads) leaves no trace and stops a load nobody waits for any more.
 */
import t from "tap";
import { ServiceBusyError } from "../../src/errors.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

t.setTimeout(60_000);

const a = fakeModel("a");
const b = fakeModel("b");

/** Lets pending promise callbacks run (no timer, no dependence on the machine's speed). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

t.test("a request beyond the queue's bound is refused with 503 and the contract's message", async (t) => {
  const { scheduler } = fakeScheduler({ maxQueue: 2 });
  const held = await scheduler.acquire(a); // the one slot
  const queued = [scheduler.acquire(a), scheduler.acquire(a)];
  t.equal(scheduler.queueDepth, 2);
  const err = await scheduler.acquire(a).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, ServiceBusyError);
  t.match(err, { status: 503, message: "server busy, please try again: maximum pending requests exceeded", headers: { "retry-after": "1" } });
  t.equal(scheduler.queueDepth, 2, "the refused request took no place in the queue");
  // A request that finds a free slot is never refused, however full the queue.
  held.release();
  (await queued[0]!).release();
  (await queued[1]!).release();
  t.equal(scheduler.queueDepth, 0);
});

t.test("waiters get the slot in arrival order", async (t) => {
  const { scheduler } = fakeScheduler();
  const first = await scheduler.acquire(a);
  const order: number[] = [];
  const waiters = [1, 2, 3].map((n) => scheduler.acquire(a).then((lease) => (order.push(n), lease)));
  await settle();
  t.same(order, [], "no slot, no grant");
  first.release();
  for (const waiter of waiters) (await waiter).release();
  t.same(order, [1, 2, 3]);
});

t.test("a request cancelled while queued leaves the queue and rejects with its signal's reason", async (t) => {
  const { scheduler } = fakeScheduler();
  const held = await scheduler.acquire(a);
  const ac = new AbortController();
  const gone = scheduler.acquire(a, { signal: ac.signal });
  const next = scheduler.acquire(a);
  t.equal(scheduler.readiness("a").queued, 2);
  const reason = new Error("client went away");
  ac.abort(reason);
  await t.rejects(gone, reason);
  t.equal(scheduler.readiness("a").queued, 1, "no trace of the cancelled request");
  held.release();
  (await next).release();
  t.equal(scheduler.list()[0]?.active, 0, "the slot went to the next request and came back");
});

t.test("an aborted signal is refused before queueing", async (t) => {
  const { scheduler, runners } = fakeScheduler();
  const reason = new Error("already gone");
  await t.rejects(scheduler.acquire(a, { signal: AbortSignal.abort(reason) }), reason);
  t.same(runners.events, [], "nothing was loaded");
});

t.test("cancelling the only request waiting for a load stops the load", async (t) => {
  const { scheduler, runners } = fakeScheduler({}, () => ({ hold: true }));
  const ac = new AbortController();
  const lease = scheduler.acquire(a, { signal: ac.signal });
  await runners.seen("hold a");
  t.equal(scheduler.loadingModel, "a");
  const reason = new Error("client went away");
  ac.abort(reason);
  await t.rejects(lease, reason, "the request ends with its own reason");
  t.same(runners.events, ["load a", "hold a", "cancel a"], "the runner was told to stop loading");
  await scheduler.drain(); // the load's turn ends
  t.equal(scheduler.loadingModel, undefined);
  t.same(scheduler.list(), [], "nothing is loaded");
  t.equal(scheduler.queueDepth, 0);
});

t.test("a load goes on while another request still waits for it", async (t) => {
  const { scheduler, runners } = fakeScheduler({ numParallel: 2 }, () => ({ hold: true }));
  const ac = new AbortController();
  const gone = scheduler.acquire(a, { signal: ac.signal });
  const stays = scheduler.acquire(a);
  await runners.seen("hold a");
  ac.abort(new Error("gone"));
  await t.rejects(gone);
  await settle();
  t.ok(runners.holding("a"), "the load was not cancelled");
  runners.finish("a");
  const lease = await stays;
  t.equal(lease.model.key, "a");
  t.ok(lease.loadNs > 0, "the waiter reports the time it waited for the load");
  t.same(runners.events, ["load a", "hold a", "ready a"]);
  lease.release();
});

t.test("a failed load fails every request waiting for that model, and only those", async (t) => {
  const boom = new Error("failed to load model 'a:latest': bad file");
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2 }, (key) => ({ hold: key === "a" }));
  const waiting = [scheduler.acquire(a), scheduler.acquire(a)];
  const other = scheduler.acquire(b);
  await runners.seen("hold a");
  runners.fail("a", boom);
  for (const w of waiting) await t.rejects(w, boom);
  (await other).release();
  t.same(
    scheduler.list().map((m) => m.model.key),
    ["b"],
  );
  t.equal(scheduler.queueDepth, 0);
});
