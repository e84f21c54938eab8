/**
 * Keep-alive on fake runners and fake timers (node:test's mock timers, so no test waits on the
 * clock): an idle model unloads when its keep-alive ends and not a moment before; a request's
 * keep-alive applies after its lease; 0 unloads at once, negative never; a request in between
 * starts the count again.
 */
import { mock } from "node:test";
import t from "tap";
import { PolicyTable } from "../../src/scheduler/policy.js";
import type { ModelPolicy } from "../../src/scheduler/policy.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

t.setTimeout(60_000);

const a = fakeModel("a");
const MIN = 60_000;
const START = 1_700_000_000_000;

/** Fake setTimeout and Date for this test only (each subtest's own timers are set before it runs). */
function fakeClock(t: { teardown(fn: () => void): void }): void {
  mock.timers.enable({ apis: ["setTimeout", "Date"], now: START });
  t.teardown(() => mock.timers.reset());
}

t.test("an idle model unloads when the default keep-alive ends, not before", async (t) => {
  fakeClock(t);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN });
  (await scheduler.acquire(a)).release();
  t.same(scheduler.list()[0]?.expiresAt, new Date(START + 5 * MIN), "/api/ps shows when it goes");
  mock.timers.tick(5 * MIN - 1);
  t.same(runners.events, ["load a", "ready a"], "still loaded a millisecond before");
  mock.timers.tick(1);
  t.same(runners.events, ["load a", "ready a", "stop a"]);
  t.same(scheduler.list(), []);
});

t.test("a request's keep-alive applies after its lease; 0 unloads at release", async (t) => {
  fakeClock(t);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN });
  const lease = await scheduler.acquire(a, { keepAliveMs: MIN });
  t.equal(scheduler.list()[0]?.expiresAt, undefined, "no expiry while in use");
  t.equal(scheduler.list()[0]?.keepAliveMs, MIN);
  mock.timers.tick(10 * MIN);
  t.same(runners.events, ["load a", "ready a"], "in use: never unloaded");
  lease.release();
  mock.timers.tick(MIN);
  t.same(runners.events.at(-1), "stop a", "the request's minute, not the default's five");

  (await scheduler.acquire(a, { keepAliveMs: 0 })).release();
  t.same(runners.events.slice(-3), ["load a", "ready a", "stop a"], "keep_alive 0: gone at release, no timer needed");
});

t.test("a negative keep-alive keeps the model forever", async (t) => {
  fakeClock(t);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN });
  (await scheduler.acquire(a, { keepAliveMs: -1 })).release();
  t.equal(scheduler.list()[0]?.expiresAt, undefined);
  mock.timers.tick(1000 * 24 * 60 * MIN);
  t.same(runners.events, ["load a", "ready a"]);
});

t.test("a request in between cancels the count; it starts again at the next release", async (t) => {
  fakeClock(t);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN });
  (await scheduler.acquire(a)).release();
  mock.timers.tick(4 * MIN);
  const lease = await scheduler.acquire(a);
  mock.timers.tick(4 * MIN);
  lease.release();
  t.same(scheduler.list()[0]?.expiresAt, new Date(START + 13 * MIN));
  mock.timers.tick(5 * MIN - 1);
  t.same(runners.events, ["load a", "ready a"], "the first count was cancelled");
  mock.timers.tick(1);
  t.same(runners.events.at(-1), "stop a");
});

t.test("the policy's keep-alive, and a reloaded policy re-arms idle models at once", async (t) => {
  fakeClock(t);
  const policy = (keepAliveMs: number) => {
    const a: ModelPolicy = { name: "a", keepAliveMs, pinned: false, preload: false, options: {} };
    return new PolicyTable(new Map([["a", a]]), undefined);
  };
  let table = policy(2 * MIN);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN, policy: () => table });
  (await scheduler.acquire(a)).release();
  t.same(scheduler.list()[0]?.expiresAt, new Date(START + 2 * MIN), "the policy's over the default");
  mock.timers.tick(MIN);
  table = policy(10 * MIN);
  scheduler.applyPolicy();
  t.same(scheduler.list()[0]?.expiresAt, new Date(START + 11 * MIN), "counted again from the reload");
  mock.timers.tick(2 * MIN);
  t.same(runners.events, ["load a", "ready a"], "the old count no longer applies");
  mock.timers.tick(8 * MIN);
  t.same(runners.events.at(-1), "stop a");
});

t.test("the keep-alive counts from the end of the last request, however long its job ran", async (t) => {
  fakeClock(t);
  const { scheduler, runners } = fakeScheduler({ defaultKeepAliveMs: 5 * MIN, numParallel: 2 }, () => ({ jobMs: 2 * MIN }));
  const leases = [await scheduler.acquire(a), await scheduler.acquire(a)];
  const runner = runners.runner("a")!;
  const done = Promise.all(leases.map((lease) => runner.work().then(() => lease.release())));
  t.equal(runner.jobs, 2);
  mock.timers.tick(2 * MIN);
  await done;
  t.equal(runner.jobs, 0);
  t.same(scheduler.list()[0]?.expiresAt, new Date(START + 7 * MIN), "five minutes after the jobs ended");
  mock.timers.tick(5 * MIN);
  t.same(runners.events, ["load a", "ready a", "stop a"]);
});
