/**
 * A runner that crashes, on fake runners: it is dropped at once, its jobs fail with a 500, the
 * other models are untouched, and the next request (or one already queued) loads the model anew.
 */
import t from "tap";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

t.setTimeout(60_000);

const [a, b] = [fakeModel("a"), fakeModel("b")];
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

t.test("a crashed runner is dropped: its job fails, the next request loads the model anew", async (t) => {
  const { scheduler, runners } = fakeScheduler({ maxLoaded: 2, numParallel: 2 });
  const other = await scheduler.acquire(b);
  const lease = await scheduler.acquire(a);
  const runner = runners.runner("a")!;
  t.equal(lease.runner, runner);
  const job = runner.work();
  runner.crash("the model runner crashed");
  await t.rejects(job, { status: 500, message: "an error occurred while running the model: the model runner crashed" });
  t.same(
    scheduler.list().map((m) => m.model.key),
    ["b"],
    "a is gone at once; b is untouched",
  );
  lease.release(); // the crashed runner's lease ends afterwards
  const again = await scheduler.acquire(a);
  t.not(again.runner, lease.runner, "a fresh runner");
  t.equal(again.runner.alive, true);
  t.same(runners.events, ["load b", "ready b", "load a", "ready a", "crash a", "load a", "ready a"]);
  again.release();
  other.release();
});

t.test("requests queued on a crashed runner's slot get the new runner", async (t) => {
  const { scheduler, runners } = fakeScheduler();
  const lease = await scheduler.acquire(a);
  const queued = scheduler.acquire(a);
  await settle();
  runners.runner("a")!.crash();
  const next = await queued;
  t.not(next.runner, lease.runner);
  t.same(runners.events, ["load a", "ready a", "crash a", "load a", "ready a"]);
  next.release();
  lease.release();
  t.equal(scheduler.list()[0]?.active, 0, "the old lease's release does not touch the new runner");
});
