/**
 * The scheduler's memory check with fake runners (the real check is in
 * test/integration/scheduler.test.ts): an idle model is evicted only when that makes room, least
 * recently used first, and the refusal carries the contract's message.
 */
import t from "tap";
import { availableRam, shortfall } from "../../src/scheduler/memory.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

const GiB = 1024 ** 3;

/** A scheduler whose runners ask for `need[name]` bytes of RAM and claim `holds[name]` once loaded. */
function setup(need: Record<string, number>, holds: Record<string, number>) {
  const { scheduler, runners } = fakeScheduler({ numParallel: 1, maxLoaded: 10, maxQueue: 10, defaultKeepAliveMs: -1 }, (key) => ({
    estimate: { ramBytes: need[key] ?? 0, vramBytes: 0, vramFreeBytes: 0, gpuLayers: 0 },
    info: { ramBytes: holds[key] ?? 0 },
  }));
  const stopped = () => runners.events.filter((e) => e.startsWith("stop ")).map((e) => e.slice(5));
  const use = async (name: string) => (await scheduler.acquire(fakeModel(name))).release();
  return { scheduler, stopped, use };
}

t.test("shortfall names what is missing", async (t) => {
  const e = { ramBytes: 3 * GiB, vramBytes: 0, vramFreeBytes: 0, gpuLayers: 0 };
  t.equal(shortfall(e, { ram: 2 * GiB, vram: 0 }), "needs 3.0 GiB, 2.0 GiB available");
  t.equal(shortfall(e, { ram: 4 * GiB, vram: 0 }), undefined);
  t.equal(shortfall({ ...e, vramBytes: 2 * GiB }, { ram: 4 * GiB, vram: GiB }), "needs 2.0 GiB of VRAM, 1.0 GiB available");
  t.ok((await availableRam()) > 0, "available RAM is read from the kernel");
});

t.test("idle models are evicted, least recently used first, only when that makes room", async (t) => {
  const free = await availableRam();
  // a and b each claim to hold half of what is free; c needs a bit more than what is free now.
  const { scheduler, stopped, use } = setup({ a: 1, b: 1, c: free + free / 4 }, { a: free / 2, b: free / 2 });
  await use("a");
  await use("b");
  await use("a"); // b is now the least recently used
  await use("c");
  t.same(stopped(), ["b"], "b alone made room");
  t.same(scheduler.list().map((m) => m.model.key).sort(), ["a", "c"]);
});

t.test("memory-driven eviction goes in least-recently-used order and stops as soon as the model fits", async (t) => {
  const free = await availableRam();
  // Each holds a third of what is free; d needs half as much again as what is free: two must go.
  const third = free / 3;
  const { scheduler, stopped, use } = setup({ a: 1, b: 1, c: 1, d: free * 1.5 }, { a: third, b: third, c: third });
  for (const name of ["a", "b", "c", "a"]) await use(name); // least recently used first: b, c, a
  await use("d");
  t.same(stopped(), ["b", "c"], "b, then c; a was not needed");
  t.same(scheduler.list().map((m) => m.model.key), ["d", "a"]);
});

t.test("a model that cannot fit even with every idle model gone is refused and nothing is evicted", async (t) => {
  const free = await availableRam();
  const { scheduler, stopped, use } = setup({ a: 1, huge: free * 4 }, { a: free / 2 });
  await use("a");
  await t.rejects(use("huge"), {
    status: 500,
    message: /^failed to load model 'huge:latest': not enough memory to load the model \(needs [\d.]+ GiB, [\d.]+ GiB available\)$/,
  });
  t.same(stopped(), [], "a was kept");
  t.same(scheduler.list().map((m) => m.model.key), ["a"]);
  t.equal(scheduler.queueDepth, 0);
});
