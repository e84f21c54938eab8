/**
 * Each runner context reuses one ggml threadpool (src/native/threadpool.c, preloaded by
 * src/runner/client.ts). Without it node-llama-cpp's prebuilt addon creates and joins a worker
 * thread in every decode: between two generations its runner has no thread beyond its own. Not a
 * timing test: it checks which threads the runner has (/proc/<pid>/task) and that the tokens are
 * the same as without the library.
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import t, { type Test } from "tap";
import { Runner, threadpoolLibrary } from "../../src/runner/client.js";
import type { GenerateJob, LoadSpec } from "../../src/runner/protocol.js";
import { testGguf } from "../helpers/models.js";
import { tracedRunner } from "../helpers/traced-runner.js";

const tasks = (pid: number) => new Set(readdirSync(`/proc/${pid}/task`));
const greedy = (text: string): GenerateJob => ({
  prompt: { kind: "text", text },
  sampling: { temperature: 0, topK: 40, topP: 0.9, minP: 0, seed: 1, repeatPenalty: 1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0, penalizeNewline: true },
  maxTokens: 24,
  stop: [],
});

/** A runner as the daemon starts one, and its "model loaded" log line; `preload`: the daemon's own LD_PRELOAD. */
async function start(t: Test, threads: number, preload?: string, speculation?: LoadSpec["speculation"]) {
  const lines: { msg: string; threadpool?: string }[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const spec: LoadSpec = { path: await testGguf({ preset: "small" }), contextSize: 1024, sequences: 1, threads, gpu: false, speculation };
  const saved = process.env.LD_PRELOAD;
  if (preload) process.env.LD_PRELOAD = preload;
  const runner = await Runner.start(spec, { name: "small", log, loadTimeoutMs: 60_000 }).finally(() => {
    if (saved === undefined) delete process.env.LD_PRELOAD;
    else process.env.LD_PRELOAD = saved;
  });
  t.teardown(() => runner.stop());
  return { runner, pid: runner.pid!, loaded: lines.find((l) => l.msg === "model loaded") };
}

t.test("npm run build made the threadpool library", async (t) => {
  t.ok(threadpoolLibrary(), "dist/native/lmd-threadpool.so exists (a C compiler is needed: scripts/build-native)");
});

t.test("a runner of 2 threads keeps one worker thread across its decodes", async (t) => {
  const { runner, pid, loaded } = await start(t, 2);
  t.equal(loaded?.threadpool, "persistent", "the daemon logs the persistent threadpool");
  t.ok(readFileSync(`/proc/${pid}/maps`, "utf8").includes("/lmd-threadpool.so"), "the library is loaded in the runner");
  const before = tasks(pid);
  await runner.generate(greedy("The first story"), () => undefined);
  const afterFirst = tasks(pid);
  await runner.generate(greedy("Another story, longer than the first"), () => undefined);
  const afterSecond = tasks(pid);
  const added = [...afterFirst].filter((id) => !before.has(id));
  t.equal(added.length, 1, `one thread was added by the first generation and stayed (${added.join(", ")})`);
  t.same([...afterSecond].sort(), [...afterFirst].sort(), "the second generation used the same threads");
});

t.test("after a generation the pool's worker stops polling soon (lmd's poll level, not ggml's default)", async (t) => {
  // CPU time, not speed: ggml's default poll level (50) spins a core for ~200 ms after the last
  // decode on this VM (~0.17 s of CPU measured in the second after a generation), lmd's (5) ~20 ms.
  const { runner, pid } = await start(t, 2);
  await runner.generate(greedy("Once upon a time"), () => undefined);
  const cpu = () => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ").slice(11, 13).reduce((a, b) => a + Number(b), 0);
  const before = cpu();
  await new Promise((r) => setTimeout(r, 1000));
  const ticks = cpu() - before;
  t.ok(ticks < 10, `CPU time in the second after the generation: ${ticks} ticks (< 10, i.e. 0.1 s)`);
});

t.test("a runner's model and draft contexts share one pool", async (t) => {
  const draftPath = await testGguf({ preset: "small", seed: 2 });
  const { runner, pid } = await start(t, 2, undefined, { draftPath, lookup: false, minConfidence: 0 });
  const before = tasks(pid);
  const stats = await runner.generate(greedy("Once upon a time"), () => undefined);
  t.ok((stats.draft?.proposed ?? 0) > 0, `the draft proposed tokens (${stats.draft?.proposed})`);
  t.equal([...tasks(pid)].filter((id) => !before.has(id)).length, 1, "one worker thread for both contexts");
});

t.test("a runner of 1 thread needs no pool", async (t) => {
  const { runner, pid } = await start(t, 1);
  const before = tasks(pid);
  await runner.generate(greedy("The first story"), () => undefined);
  t.same([...tasks(pid)].sort(), [...before].sort(), "no thread was added");
});

t.test("the tokens are the same with the library as without it", async (t) => {
  const pooled = await start(t, 2);
  const plain = await tracedRunner(t, { sequences: 1, threads: 2 }); // forked without the library
  const loaded = plain.received.find((m) => m.type === "loaded");
  t.equal(loaded?.type === "loaded" && loaded.info.threadpool, "per-decode", "the other runner decodes as node-llama-cpp does alone");
  for (const [id, prompt] of [[1, "Once upon a time"], [2, "The weather today is"]] as const) {
    const a = await pooled.runner.generate(greedy(prompt), () => undefined);
    const b = await plain.generate(id, greedy(prompt));
    t.ok(a.evalCount > 8, `${prompt}: ${a.evalCount} tokens`);
    t.same(a.context, b.type === "done" && b.stats.context, `${prompt}: the same tokens`);
  }
});

t.test("a second copy of the library preloaded beside it (the daemon's own LD_PRELOAD) changes nothing", async (t) => {
  const copy = path.join(mkdtempSync(path.join(tmpdir(), "lmd-threadpool-")), "lmd-threadpool.so");
  copyFileSync(threadpoolLibrary()!, copy);
  const { runner, pid } = await start(t, 2, copy);
  const preloaded = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").find((v) => v.startsWith("LD_PRELOAD="));
  t.equal(preloaded, `LD_PRELOAD=${copy} ${threadpoolLibrary()}`, "the daemon's LD_PRELOAD is kept, the library added after it");
  const before = tasks(pid);
  const stats = await runner.generate(greedy("Once upon a time"), () => undefined);
  t.ok(stats.evalCount > 8, `it generates (${stats.evalCount} tokens): the copies do not call each other`);
  t.equal([...tasks(pid)].filter((id) => !before.has(id)).length, 1, "one pool, not two");
});
