/**
 * What the scheduler puts in a runner's load spec from the daemon's configuration, with a fake
 * runner that records the spec (the runner's side of SERVICE_STREAM_INTERVAL is
 * test/native/runner-output.test.ts).
 */
import t from "tap";
import { Scheduler, type SchedulerOptions } from "../../src/scheduler/scheduler.js";
import { silentLogger } from "../../src/logger.js";
import type { ResolvedModel } from "../../src/store/store.js";
import type { Runner } from "../../src/runner/client.js";
import type { LoadSpec } from "../../src/runner/protocol.js";

const model = { key: "m", display: "m:latest", digest: `sha256:${"0".repeat(64)}`, modelPath: "/nowhere/m", params: {} } as unknown as ResolvedModel;

async function specOf(options: Partial<SchedulerOptions>): Promise<LoadSpec> {
  const specs: LoadSpec[] = [];
  const startRunner = async (spec: LoadSpec): Promise<Runner> => {
    specs.push(spec);
    return { info: { contextSize: 1024, ramBytes: 0, vramBytes: 0, gpu: false }, alive: true, pid: 1, stop: async () => undefined } as unknown as Runner;
  };
  const scheduler = new Scheduler({ log: silentLogger(), numParallel: 2, maxLoaded: 1, maxQueue: 1, defaultKeepAliveMs: -1, defaultContextLength: 1024, threads: 3, gpu: false, loadTimeoutMs: 1000, startRunner, ...options });
  (await scheduler.acquire(model)).release();
  return specs[0]!;
}

t.test("the load spec carries SERVICE_STREAM_INTERVAL, and leaves it to the runner's default when unset", async (t) => {
  const spec = await specOf({ streamIntervalMs: 0 });
  t.equal(spec.streamIntervalMs, 0, "0 (each token at once) reaches the runner");
  t.equal((await specOf({ streamIntervalMs: 25 })).streamIntervalMs, 25);
  t.notOk("streamIntervalMs" in (await specOf({})), "unset: not in the spec");
  t.same([spec.sequences, spec.threads, spec.contextSize], [2, 3, 1024], "with the other settings");
});
