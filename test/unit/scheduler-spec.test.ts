/**
 * What the scheduler puts in a runner's load spec from the daemon's configuration, with a fake
 * runner that records the spec (the runner's side of SERVICE_STREAM_INTERVAL is
 * test/native/runner-output.test.ts).
 */
import os from "node:os";
import t from "tap";
import type { SchedulerOptions } from "../../src/scheduler/scheduler.js";
import type { LoadSpec } from "../../src/runner/types.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

const model = fakeModel("m");

async function specOf(options: Partial<SchedulerOptions>): Promise<LoadSpec> {
  const defaults = { numParallel: 2, maxLoaded: 1, maxQueue: 1, defaultKeepAliveMs: -1, defaultContextLength: 1024, threads: 3, gpu: false } as const;
  const { scheduler, runners } = fakeScheduler({ ...defaults, ...options });
  (await scheduler.acquire(model)).release();
  return runners.specs[0]!;
}

t.test("the load spec carries SERVICE_STREAM_INTERVAL, and leaves it to the runner's default when unset", async (t) => {
  const spec = await specOf({ streamIntervalMs: 0 });
  t.equal(spec.streamIntervalMs, 0, "0 (each token at once) reaches the runner");
  t.equal((await specOf({ streamIntervalMs: 25 })).streamIntervalMs, 25);
  t.notOk("streamIntervalMs" in (await specOf({})), "unset: not in the spec");
  t.same([spec.sequences, spec.threads, spec.contextSize], [2, 3, 1024], "with the other settings");
});

t.test("num_thread is capped at the CPUs the daemon may run on", async (t) => {
  const specWith = async (numThread: number) => {
    const { scheduler, runners } = fakeScheduler({ numParallel: 1, maxLoaded: 1, maxQueue: 1, defaultKeepAliveMs: -1, defaultContextLength: 1024, gpu: false });
    (await scheduler.acquire(model, { numThread })).release();
    return runners.specs[0]!.threads;
  };
  t.equal(await specWith(100_000), os.availableParallelism(), "a huge count: every CPU, no more");
  t.equal(await specWith(1), 1, "a count within them: as asked");
});
