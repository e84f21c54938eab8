/**
 * A step's sampling is queued behind its decode (patches/node-llama-cpp+3.22.1.patch,
 * `sampleBehindDecode`). A runner has one libuv thread (UV_THREADPOOL_SIZE=1), which runs native
 * work in the order it is queued, so the sampling of a batch's tokens can be queued as soon as the
 * batch's decode is: the thread samples the moment the decode ends, instead of waking the main
 * thread to be handed each sampling (0.19 → 0.06 ms from a decode's end to its first token, traced
 * with 8 streams). With more threads the sampling could run before the decode ends, so it waits for
 * the decode as before. Not a timing test: test/helpers/runner-trace.mjs counts the samplings
 * started while a decode was running.
 */
import t from "tap";
import { storyJob, tracedRunner, type Traced } from "../helpers/traced-runner.js";

const doneOf = (received: Traced[], id: number) => received.find((m): m is Extract<Traced, { type: "done" }> => m.type === "done" && m.id === id);

t.test("on a runner's single libuv thread, each step's sampling starts while its decode runs", async (t) => {
  const { received, send, until } = await tracedRunner(t, { sequences: 2 });
  send({ type: "generate", id: 1, job: storyJob(1) });
  send({ type: "generate", id: 2, job: storyJob(2) });
  await until(() => received.filter((m) => m.type === "done" || m.type === "failed").length === 2);
  t.same(received.filter((m) => m.type === "failed"), [], "both generations succeed");
  const sampled = [doneOf(received, 1), doneOf(received, 2)].sort((a, b) => b!.sampled!.total - a!.sampled!.total)[0]!.sampled!;
  t.ok(sampled.total >= 80, `tokens were sampled (${sampled.total})`);
  t.ok(sampled.duringDecode >= 0.9 * sampled.total, `samplings started during their decode: ${sampled.duringDecode} of ${sampled.total}`);
});

t.test("the tokens are the same whether the sampling is queued behind the decode or waits for it", async (t) => {
  const behind = await tracedRunner(t, { sequences: 1 });
  const after = await tracedRunner(t, { sequences: 1, uvThreads: "4" });
  for (const seed of [3, 4]) {
    for (const r of [behind, after]) r.send({ type: "generate", id: seed, job: storyJob(seed, 64) });
    for (const r of [behind, after]) await r.until(() => r.received.some((m) => (m.type === "done" || m.type === "failed") && m.id === seed));
    const [b, a] = [doneOf(behind.received, seed), doneOf(after.received, seed)];
    if (!t.ok(b && a, `seed ${seed}: both generations succeed`, { failed: [...behind.received, ...after.received].filter((m) => m.type === "failed") })) return;
    t.ok(b!.stats.evalCount > 16, `seed ${seed}: ${b!.stats.evalCount} tokens`);
    t.same(b!.stats.context, a!.stats.context, `seed ${seed}: the same tokens`);
    t.equal(b!.sampled!.duringDecode, b!.sampled!.total, `seed ${seed}: 1 libuv thread: every sampling queued during its decode`);
    t.equal(a!.sampled!.duringDecode, 0, `seed ${seed}: 4 libuv threads: no sampling before its decode ended`);
  }
});
