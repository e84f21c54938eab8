/**
 * Each runner context reuses one ggml threadpool (src/native/threadpool.c, preloaded by
 * src/runner/client.ts). Without it node-llama-cpp's prebuilt addon creates and joins a worker
 * thread in every decode: between two generations its runner has no thread beyond its own. Not a
 * timing test: it checks which threads the runner has (/proc/<pid>/task) and that the tokens are
 * the same as without the library.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pino } from "pino";
import t, { type Test } from "tap";
import { Runner } from "../../src/runner/client.js";
import { threadpoolLibrary } from "../../src/runner/spawn.js";
import type { GenerateJob, LoadSpec } from "../../src/runner/types.js";
import { testGguf } from "../helpers/models.js";
import { greedyJob, tracedRunner } from "../helpers/traced-runner.js";

const run = promisify(execFile);
const tasks = (pid: number) => new Set(readdirSync(`/proc/${pid}/task`));
const greedy = (text: string): GenerateJob => greedyJob(text, 24);

/** A runner as the daemon starts one, and its "model loaded" log line; `preload`: the daemon's own LD_PRELOAD. */
async function start(t: Test, threads: number, preload?: string, speculation?: LoadSpec["speculation"]) {
  const lines: { msg: string; threadpool?: string; threads?: number; from?: number; to?: number }[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const spec: LoadSpec = { path: await testGguf({ preset: "small" }), contextSize: 1024, sequences: 1, threads, gpu: false, speculation };
  const saved = process.env.LD_PRELOAD;
  if (preload) process.env.LD_PRELOAD = preload;
  const runner = await Runner.start(spec, { name: "small", log, loadTimeoutMs: 60_000 }).finally(() => {
    if (saved === undefined) delete process.env.LD_PRELOAD;
    else process.env.LD_PRELOAD = saved;
  });
  t.teardown(() => runner.stop());
  return { runner, pid: runner.pid!, loaded: lines.find((l) => l.msg === "model loaded"), lines };
}

/** A busy loop pinned to CPU 0 for at most `seconds`, killed on teardown. */
function hog(t: Test, seconds = 60): ChildProcess {
  const child = spawn("taskset", ["-c", "0", process.execPath, "-e", `const end = Date.now() + ${seconds * 1000}; while (Date.now() < end);`], {
    stdio: "ignore",
  });
  t.teardown(() => void child.kill("SIGKILL"));
  return child;
}

/** Generates until `until()` holds, for at most `ms` (a generation still going then is cancelled); whether it held. */
async function generateUntil(runner: Runner, until: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (let i = 0; !until() && Date.now() < end; i++) {
    await runner
      .complete(
        { kind: "generate", job: { ...greedy(`Story number ${i}`), maxTokens: 200 } },
        { onText: () => undefined, signal: AbortSignal.timeout(Math.max(1, end - Date.now())) },
      )
      .catch(() => undefined);
  }
  return until();
}

t.test("npm run build made the threadpool library", async (t) => {
  t.ok(threadpoolLibrary(), "dist/native/lmd-threadpool.so exists (a C compiler is needed: scripts/build-native)");
});

t.test("a runner of 2 threads keeps one worker thread across its decodes", async (t) => {
  const { runner, pid, loaded } = await start(t, 2);
  t.equal(loaded?.threadpool, "persistent", "the daemon logs the persistent threadpool");
  t.ok(readFileSync(`/proc/${pid}/maps`, "utf8").includes("/lmd-threadpool.so"), "the library is loaded in the runner");
  const before = tasks(pid);
  await runner.complete({ kind: "generate", job: greedy("The first story") }, { onText: () => undefined });
  const afterFirst = tasks(pid);
  await runner.complete({ kind: "generate", job: greedy("Another story, longer than the first") }, { onText: () => undefined });
  const afterSecond = tasks(pid);
  const added = [...afterFirst].filter((id) => !before.has(id));
  t.equal(added.length, 1, `one thread was added by the first generation and stayed (${added.join(", ")})`);
  t.same([...afterSecond].sort(), [...afterFirst].sort(), "the second generation used the same threads");
});

t.test("after a generation the pool's worker stops polling soon (lmd's poll level, not ggml's default)", async (t) => {
  // CPU time, not speed: ggml's default poll level (50) spins a core for ~200 ms after the last
  // decode on this VM (~0.17 s of CPU measured in the second after a generation), lmd's (5) ~20 ms.
  const { runner, pid } = await start(t, 2);
  await runner.complete({ kind: "generate", job: greedy("Once upon a time") }, { onText: () => undefined });
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
  const stats = await runner.complete({ kind: "generate", job: greedy("Once upon a time") }, { onText: () => undefined });
  t.ok((stats.draft?.proposed ?? 0) > 0, `the draft proposed tokens (${stats.draft?.proposed})`);
  t.equal([...tasks(pid)].filter((id) => !before.has(id)).length, 1, "one worker thread for both contexts");
});

t.test("a runner of 1 thread needs no pool", async (t) => {
  const { runner, pid } = await start(t, 1);
  const before = tasks(pid);
  await runner.complete({ kind: "generate", job: greedy("The first story") }, { onText: () => undefined });
  t.same([...tasks(pid)].sort(), [...before].sort(), "no thread was added");
});

t.test("automatic threads follow a busy process that arrives after the load, and leaves", async (t) => {
  // src/runner/threads.ts: not a timing test; it checks which threads the runner decodes with (its
  // log lines) and has (/proc/<pid>/task): a pool of 2 threads has one worker, one thread none.
  if (os.availableParallelism() !== 2) return t.skip("written for 2 CPUs, as CI's machine has");
  const { runner, pid, lines } = await start(t, 0);
  const chosen = lines.find((l) => l.msg === "threads chosen from the free cores");
  if (chosen?.threads !== 2) return t.skip(`the host was busy at load (${chosen?.threads} thread chosen)`);
  const changed = (to: number) => lines.some((l) => l.msg === "threads changed" && l.to === to);
  await runner.complete({ kind: "generate", job: greedy("Once upon a time") }, { onText: () => undefined });
  const pooled = tasks(pid);
  const busy = hog(t);
  t.ok(await generateUntil(runner, () => changed(1), 20_000), "with a busy process on one of the 2 cores, it decodes with 1 thread");
  await runner.complete({ kind: "generate", job: greedy("Once upon a time") }, { onText: () => undefined });
  const single = tasks(pid);
  t.equal([...pooled].filter((id) => !single.has(id)).length, 1, "the pool's worker thread is gone (a pool of 2 would leave it polling through every decode)");
  busy.kill("SIGKILL");
  t.ok(await generateUntil(runner, () => changed(2), 20_000), "once it left, with 2 again");
  t.equal([...tasks(pid)].filter((id) => !single.has(id)).length, 1, "with a worker thread again");
});

t.test("a context's threads changed back and forth between decodes: it decodes on, and frees cleanly", async (t) => {
  // A pool a context leaves is freed only after the context's next decode: ggml's CPU backend keeps
  // the pool it last computed with and pauses it when the next graph switches away from it
  // (ggml_backend_cpu_set_threadpool). Freed at the change itself, it was used after free: with two
  // models decoding at once the governors changed threads every few seconds and a runner hung,
  // then died of SIGSEGV; 150 changes hung or aborted in 7 runs of 7 on that library.
  const library = threadpoolLibrary();
  if (!library) return t.fail("the threadpool library was not built");
  const flips = 150;
  const script = fileURLToPath(new URL("../helpers/thread-flips.mjs", import.meta.url));
  const { stdout } = await run(process.execPath, [script, await testGguf({ preset: "small" }), String(flips)], {
    env: { ...process.env, LD_PRELOAD: library, UV_THREADPOOL_SIZE: "1" },
    timeout: 120_000,
    killSignal: "SIGKILL",
  });
  const { sent, held } = JSON.parse(stdout) as { sent: number; held: number };
  t.ok(sent > flips, `${sent} tokens sent over ${flips} changes`);
  t.equal(held, sent, "the context holds every token decoded after each change");
});

t.test("threads set by number stay as set, whatever else runs", async (t) => {
  if (os.availableParallelism() < 2) return t.skip("needs 2 CPUs");
  const { runner, lines } = await start(t, 2);
  hog(t, 20);
  const changed = () => lines.some((l) => l.msg.startsWith("threads"));
  t.notOk(await generateUntil(runner, changed, 4_000), "no thread change in 4 s of decoding beside a busy process");
});

t.test("the tokens are the same with the library as without it", async (t) => {
  const pooled = await start(t, 2);
  const plain = await tracedRunner(t, { sequences: 1, threads: 2 }); // forked without the library
  const loaded = plain.received.find((m) => m.type === "loaded");
  t.equal(loaded?.type === "loaded" && loaded.info.threadpool, "per-decode", "the other runner decodes as node-llama-cpp does alone");
  for (const [id, prompt] of [[1, "Once upon a time"], [2, "The weather today is"]] as const) {
    const a = await pooled.runner.complete({ kind: "generate", job: greedy(prompt) }, { onText: () => undefined });
    const b = await plain.generate(id, greedy(prompt));
    t.ok(a.evalCount > 8, `${prompt}: ${a.evalCount} tokens`);
    t.same(a.context, b.type === "done" && b.stats.context, `${prompt}: the same tokens`);
  }
});

t.test("a second copy of the library preloaded beside it (the daemon's own LD_PRELOAD) changes nothing", async (t) => {
  const copy = path.join(mkdtempSync(path.join(os.tmpdir(), "lmd-threadpool-")), "lmd-threadpool.so");
  copyFileSync(threadpoolLibrary()!, copy);
  const { runner, pid } = await start(t, 2, copy);
  const preloaded = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").find((v) => v.startsWith("LD_PRELOAD="));
  t.equal(preloaded, `LD_PRELOAD=${copy} ${threadpoolLibrary()}`, "the daemon's LD_PRELOAD is kept, the library added after it");
  const before = tasks(pid);
  const stats = await runner.complete({ kind: "generate", job: greedy("Once upon a time") }, { onText: () => undefined });
  t.ok(stats.evalCount > 8, `it generates (${stats.evalCount} tokens): the copies do not call each other`);
  t.equal([...tasks(pid)].filter((id) => !before.has(id)).length, 1, "one pool, not two");
});
