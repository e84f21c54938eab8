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
import { storyJob, tracedRunner } from "../helpers/traced-runner.js";

t.test("on a runner's single libuv thread, each step's sampling starts while its decode runs", async (t) => {
  const { generate } = await tracedRunner(t, { sequences: 2 });
  const ended = await Promise.all([generate(1, storyJob(1)), generate(2, storyJob(2))]);
  if (!t.ok(ended.every((m) => m.type === "done"), "both generations succeed", { ended })) return;
  // The counters are the runner's: the job that ended last has seen every sampling.
  const sampled = ended.map((m) => m.sampled!).sort((a, b) => b.total - a.total)[0]!;
  t.ok(sampled.total >= 80, `tokens were sampled (${sampled.total})`);
  t.ok(sampled.duringDecode >= 0.9 * sampled.total, `samplings started during their decode: ${sampled.duringDecode} of ${sampled.total}`);
});

t.test("the tokens are the same whether the sampling is queued behind the decode or waits for it", async (t) => {
  const behind = await tracedRunner(t, { sequences: 1 });
  const after = await tracedRunner(t, { sequences: 1, uvThreads: "4" });
  for (const seed of [3, 4]) {
    const [b, a] = await Promise.all([behind.generate(seed, storyJob(seed, 64)), after.generate(seed, storyJob(seed, 64))]);
    t.ok(b.type === "done" && a.type === "done", `seed ${seed}: both generations succeed`, { b, a });
    if (b.type !== "done" || a.type !== "done") return;
    t.ok(b.stats.evalCount > 16, `seed ${seed}: ${b.stats.evalCount} tokens`);
    t.same(b.stats.context, a.stats.context, `seed ${seed}: the same tokens`);
    t.equal(b.sampled!.duringDecode, b.sampled!.total, `seed ${seed}: 1 libuv thread: every sampling queued during its decode`);
    t.equal(a.sampled!.duringDecode, 0, `seed ${seed}: 4 libuv threads: no sampling before its decode ended`);
  }
});
